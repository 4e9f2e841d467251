package client

import (
	"errors"

	"fmt"
	"github.com/plasmafs/plasma/internal/auth"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Config says which cluster to use and who the client is.
type Config struct {
	Cluster   string   // cluster name (informational; checked by datanodes later)
	Namenodes []string // host:port of the namenodes; the first reachable is used
	User      string   // file owner for new files (default: the OS user)
	Group     string   // file group for new files (default: User)
	// NoShortCircuit makes the client read local blocks over TCP too.
	NoShortCircuit bool
	// Security and DataSecurity are the levels ("none", "auth",
	// "integrity", "privacy") of namenode and datanode connections; empty
	// means the cluster defaults "privacy" and "auth". A server's level is
	// the least it accepts: a client may choose a stronger one.
	Security     string
	DataSecurity string
	// CredentialFile is the user's credential ('plasma admin user add'),
	// needed above level none.
	CredentialFile string
	// Credential, if set, is used instead of CredentialFile (a delegated
	// credential a MapReduce task server got with a task; see
	// Client.Delegate).
	Credential *auth.Credential
	// KeepaliveInterval is how often the client tells the namenode that it
	// is alive, which keeps its open transactions (readers that need no
	// namenode request for hours) from being aborted as idle. Zero means a
	// third of the namenode's transaction timeout; negative disables it.
	KeepaliveInterval time.Duration
	// Source says where LoadConfig found the cluster: "-namenode",
	// "$PLASMAFS_NAMENODES" or the configuration file's path.
	Source string
}

// ClusterEntry is one cluster of a client configuration file.
type ClusterEntry struct {
	Name         string
	Namenodes    []string
	Security     string
	DataSecurity string
	Credential   string
	// TaskServers are the addresses of the cluster's MapReduce task
	// servers ('plasma mr taskserver', started by 'plasma cluster up')
	// and TaskServerToken the file holding their token: what 'plasma mr
	// run' uses when a job names none. The client itself ignores them.
	TaskServers     []string
	TaskServerToken string
}

// ConfigFile returns the path of the client configuration file:
// $PLASMAFS_CONFIG if set, else ~/.plasmafs.
func ConfigFile() string {
	if p := os.Getenv("PLASMAFS_CONFIG"); p != "" {
		return p
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ".plasmafs"
	}
	return filepath.Join(home, ".plasmafs")
}

// LoadConfig finds the cluster to use, as the original plasma tool did:
// explicit namenodes (with cluster) win; else the entry named cluster in
// the configuration file; else $PLASMAFS_CLUSTER and $PLASMAFS_NAMENODES;
// else the first entry of the configuration file.
func LoadConfig(cluster string, namenodes []string) (cfg Config, err error) {
	// -namenode h1:p,h2:p names a namenode group's members.
	var addrs []string
	for _, a := range namenodes {
		for _, b := range strings.Split(a, ",") {
			if b = strings.TrimSpace(b); b != "" {
				addrs = append(addrs, b)
			}
		}
	}
	namenodes = addrs
	cfg = Config{Cluster: cluster, Namenodes: namenodes}
	defer func() {
		// The environment overrides the file.
		if v := os.Getenv("PLASMAFS_SECURITY"); v != "" {
			cfg.Security = v
		}
		if v := os.Getenv("PLASMAFS_DATA_SECURITY"); v != "" {
			cfg.DataSecurity = v
		}
		if v := os.Getenv("PLASMAFS_CREDENTIAL"); v != "" {
			cfg.CredentialFile = v
		}
	}()
	if len(namenodes) > 0 {
		cfg.Source = "-namenode"
		return cfg, nil
	}
	if cluster == "" {
		cluster = os.Getenv("PLASMAFS_CLUSTER")
		if env := os.Getenv("PLASMAFS_NAMENODES"); env != "" {
			for _, a := range strings.Split(env, ",") {
				if a = strings.TrimSpace(a); a != "" {
					cfg.Namenodes = append(cfg.Namenodes, a)
				}
			}
			cfg.Cluster, cfg.Source = cluster, "$PLASMAFS_NAMENODES"
			return cfg, nil
		}
	}
	path := ConfigFile()
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return cfg, fmt.Errorf("no cluster configured: %s does not exist and PLASMAFS_NAMENODES is not set (start one with 'plasma cluster up', or pass -namenode host:port)", path)
		}
		return cfg, err
	}
	entries, err := ParseConfigFile(string(b))
	if err != nil {
		return cfg, fmt.Errorf("%s: %w", path, err)
	}
	for _, e := range entries {
		if cluster == "" || e.Name == cluster {
			cfg.Cluster, cfg.Source = e.Name, path
			cfg.Namenodes = e.Namenodes
			cfg.Security, cfg.DataSecurity, cfg.CredentialFile = e.Security, e.DataSecurity, e.Credential
			return cfg, nil
		}
	}
	if cluster == "" {
		return cfg, fmt.Errorf("%s lists no cluster", path)
	}
	return cfg, fmt.Errorf("cluster %q is not in %s", cluster, path)
}

// ParseConfigFile parses the original's client configuration syntax:
//
//	plasmafs {
//	  cluster { clustername = "c1"; node { addr = "127.0.0.1:2730" }; };
//	}
func ParseConfigFile(s string) ([]ClusterEntry, error) {
	toks, err := tokenize(s)
	if err != nil {
		return nil, err
	}
	var out []ClusterEntry
	var stack []string
	var cur *ClusterEntry
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		switch {
		case t == "{":
			return nil, errors.New("unexpected '{'")
		case t == "}":
			if len(stack) == 0 {
				return nil, errors.New("unbalanced '}'")
			}
			if stack[len(stack)-1] == "cluster" && cur != nil {
				out = append(out, *cur)
				cur = nil
			}
			stack = stack[:len(stack)-1]
		case t == ";":
		case i+1 < len(toks) && toks[i+1] == "{":
			stack = append(stack, t)
			if t == "cluster" {
				cur = &ClusterEntry{}
			}
			i++
		case i+2 < len(toks) && toks[i+1] == "=":
			v := toks[i+2]
			i += 2
			if cur == nil {
				continue
			}
			switch t {
			case "clustername":
				cur.Name = v
			case "addr":
				cur.Namenodes = append(cur.Namenodes, v)
			case "security":
				cur.Security = v
			case "data_security":
				cur.DataSecurity = v
			case "credential":
				cur.Credential = v
			case "taskserver":
				cur.TaskServers = append(cur.TaskServers, v)
			case "taskserver_token":
				cur.TaskServerToken = v
			}
		default:
			return nil, fmt.Errorf("unexpected %q", t)
		}
	}
	if len(stack) != 0 {
		return nil, errors.New("missing '}'")
	}
	return out, nil
}

func tokenize(s string) ([]string, error) {
	var toks []string
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '#':
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '{' || c == '}' || c == ';' || c == '=':
			toks = append(toks, string(c))
			i++
		case c == '"':
			j := strings.IndexByte(s[i+1:], '"')
			if j < 0 {
				return nil, errors.New("unterminated string")
			}
			toks = append(toks, s[i+1:i+1+j])
			i += j + 2
		default:
			j := i
			for j < len(s) && !strings.ContainsRune(" \t\r\n{};=\"#", rune(s[j])) {
				j++
			}
			toks = append(toks, s[i:j])
			i = j
		}
	}
	return toks, nil
}

// FormatConfigFile renders entries in the syntax ParseConfigFile reads.
func FormatConfigFile(entries []ClusterEntry) string {
	var b strings.Builder
	b.WriteString("plasmafs {\n")
	for _, e := range entries {
		fmt.Fprintf(&b, "  cluster {\n    clustername = %q;\n", e.Name)
		// In a fixed order: the same entries give the same text.
		for _, kv := range [][2]string{{"security", e.Security}, {"data_security", e.DataSecurity}, {"credential", e.Credential}, {"taskserver_token", e.TaskServerToken}} {
			if kv[1] != "" {
				fmt.Fprintf(&b, "    %s = %q;\n", kv[0], kv[1])
			}
		}
		for _, a := range e.Namenodes {
			fmt.Fprintf(&b, "    node { addr = %q; };\n", a)
		}
		for _, a := range e.TaskServers {
			fmt.Fprintf(&b, "    taskserver = %q;\n", a)
		}
		b.WriteString("  };\n")
	}
	b.WriteString("}\n")
	return b.String()
}
