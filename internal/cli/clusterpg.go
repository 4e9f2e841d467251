package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/plasmafs/plasma/internal/meta"
	"github.com/plasmafs/plasma/internal/pgserver"
)

// The metadata stores 'cluster up -store' offers.
const (
	storeSQLite   = "sqlite"
	storePostgres = "postgres"
)

// clusterPGDatabase is the database a cluster's namenode uses in the
// cluster's own PostgreSQL server.
const clusterPGDatabase = "plasma"

// clusterPGDir is where a cluster's PostgreSQL server lives: DIR/pg, or,
// when running as root, under /var/lib/postgresql: PostgreSQL runs as
// user postgres then (it refuses root), which cannot reach into a cluster
// directory that is private to root (nor, usually, into root's home).
func clusterPGDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if os.Geteuid() != 0 {
		return filepath.Join(abs, "pg"), nil
	}
	sum := sha256.Sum256([]byte(abs))
	return filepath.Join("/var/lib/postgresql", "plasma-"+hex.EncodeToString(sum[:6])), nil
}

// clusterStoreArgs are the namenode's -db (and -log) flags for the
// cluster's store.
func (u *clusterUp) clusterStoreArgs() ([]string, error) {
	if u.settings.Store != storePostgres {
		return []string{"-db", filepath.Join(u.dir, "namenode.db")}, nil
	}
	pgDir, err := clusterPGDir(u.dir)
	if err != nil {
		return nil, err
	}
	srv, err := pgserver.At(pgDir) // initialised by createVolumes
	if err != nil {
		return nil, err
	}
	return []string{"-db", srv.URL(clusterPGDatabase), "-log", filepath.Join(u.dir, "namenode-commit.log")}, nil
}

// startClusterPostgres initialises (first time) and starts the cluster's
// PostgreSQL server unless it runs, and makes sure its database exists;
// it returns the database's URL.
func startClusterPostgres(dir string) (string, error) {
	pgDir, err := clusterPGDir(dir)
	if err != nil {
		return "", err
	}
	srv, err := pgserver.Init(pgDir, true)
	if err != nil {
		return "", fmt.Errorf("the cluster's PostgreSQL server in %s: %w", pgDir, err)
	}
	if !srv.Running() {
		fmt.Fprintf(stdout, "starting PostgreSQL in %s\n", pgDir)
		if err := srv.Start(); err != nil {
			return "", fmt.Errorf("start the cluster's PostgreSQL server: %w", err)
		}
	}
	if err := srv.EnsureDB(clusterPGDatabase); err != nil {
		return "", err
	}
	return srv.URL(clusterPGDatabase), nil
}

// formatNewPostgresCluster starts the cluster's PostgreSQL server and
// creates the namespace in its database, unless it holds one.
func formatNewPostgresCluster(ctx context.Context, dir string, datanodes int) error {
	url, err := startClusterPostgres(dir)
	if err != nil {
		return err
	}
	store, err := meta.Open(ctx, url, meta.OpenOptions{})
	if err == nil {
		return store.Close()
	}
	if !errors.Is(err, meta.ErrNoDatabase) {
		return err
	}
	if err := refuseVolumesWithoutNamespace(url, dir, datanodes); err != nil {
		return err
	}
	if store, err = meta.Open(ctx, url, meta.OpenOptions{Format: true}); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "new namespace %s in PostgreSQL (%s)\n", store.(meta.Namespacer).Namespace(), meta.Redact(url))
	return store.Close()
}

// stopClusterPostgres stops the cluster's PostgreSQL server, if it has
// one and it runs (cluster down, once the namenode is gone).
func stopClusterPostgres(dir string) error {
	pgDir, err := clusterPGDir(dir)
	if err != nil {
		return err
	}
	srv, err := pgserver.At(pgDir)
	if err != nil {
		return nil // the cluster keeps its metadata in SQLite
	}
	if err := srv.Stop(); err != nil {
		return fmt.Errorf("stop the cluster's PostgreSQL server: %w", err)
	}
	return nil
}

// stopStore stops the cluster's PostgreSQL server (when the cluster
// stops), reporting a failure.
func (u *clusterUp) stopStore() {
	if u.settings.Store != storePostgres {
		return
	}
	if err := stopClusterPostgres(u.dir); err != nil {
		fmt.Fprintf(stderr, "plasma cluster up: %v\n", err)
	}
}
