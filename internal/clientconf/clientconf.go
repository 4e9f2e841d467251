// Package clientconf reads and writes the client configuration file
// (~/.plasmafs, in the original Plasma's syntax): client.LoadConfig finds
// a cluster in it, 'plasma cluster up' writes it, 'plasma params' and the
// MapReduce commands read the entries' other fields.
package clientconf

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Cluster is one cluster of a client configuration file.
type Cluster struct {
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

// Path returns the path of the client configuration file:
// $PLASMAFS_CONFIG if set, else ~/.plasmafs.
func Path() string {
	if p := os.Getenv("PLASMAFS_CONFIG"); p != "" {
		return p
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ".plasmafs"
	}
	return filepath.Join(home, ".plasmafs")
}

// Parse parses the original's client configuration syntax:
//
//	plasmafs {
//	  cluster { clustername = "c1"; node { addr = "127.0.0.1:2730" }; };
//	}
func Parse(s string) ([]Cluster, error) {
	toks, err := tokenize(s)
	if err != nil {
		return nil, err
	}
	var out []Cluster
	var stack []string
	var cur *Cluster
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
				cur = &Cluster{}
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

// Format renders entries in the syntax Parse reads.
func Format(entries []Cluster) string {
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
