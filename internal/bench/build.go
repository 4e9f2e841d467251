package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// BuildOptions configure the parallel C build (seed 003 in miniature).
type BuildOptions struct {
	Target string   // directory to build in: a directory of the PlasmaFS mount
	Refs   []string // reference directories: the local filesystem the cluster runs on, a loopback mount of it
	Files  int      // generated .c modules (each with its header), besides main.c
	Jobs   int      // make -j
	Runs   int      // repetitions; medians are reported
}

// buildPhase is one timed step of a build run.
type buildPhase struct {
	name, seed string
}

var buildPhases = []buildPhase{
	{"write the sources (create, write, close each file)", ""},
	{"make -jN all, sources cached (seed 003's method)", "glfs 61:54 vs ext3 6:40: 9.3× (RHEL 5.4 kernel, make -j8)"},
	{"make again, nothing to do (stat of every file)", ""},
	{"remove the tree (rm -r)", ""},
}

// Build writes a generated C project (Files modules with a header each, a
// main.c and a Makefile building a static library and a program) into the
// target and into each reference directory, builds it there as seed 003
// did (make clean; read every file; sync; time make -jN all), runs make
// again (nothing to do), checks that every side built the same program
// printing the same output, and removes the tree. Each run goes round
// the sides in turn; the report has the median time of each step beside
// each reference's, the ratio being time ÷ reference time (lower is
// better).
func Build(ctx context.Context, o BuildOptions) (*Report, error) {
	if o.Files <= 0 {
		o.Files = 40
	}
	if o.Jobs <= 0 {
		o.Jobs = 2
	}
	if o.Runs <= 0 {
		o.Runs = 3
	}
	if _, err := exec.LookPath("make"); err != nil {
		return nil, fmt.Errorf("make is needed: %w", err)
	}
	if _, err := exec.LookPath("cc"); err != nil {
		return nil, fmt.Errorf("a C compiler (cc) is needed: %w", err)
	}
	sides := append([]string{o.Target}, o.Refs...)
	for _, d := range sides {
		if st, err := os.Stat(d); err != nil {
			return nil, err
		} else if !st.IsDir() {
			return nil, fmt.Errorf("%s: not a directory", d)
		}
	}
	rep := &Report{Bench: "build", Started: time.Now(),
		Params: fmt.Sprintf("files=%d (+ headers, main.c, Makefile) jobs=%d runs=%d", o.Files, o.Jobs, o.Runs)}
	src := generateProject(o.Files)
	times := make([][][]float64, len(sides)) // side, phase, run
	for s := range times {
		times[s] = make([][]float64, len(buildPhases))
	}
	for run := 0; run < o.Runs; run++ {
		var prog, out []byte // of the first side, to compare with
		for s, side := range sides {
			dir := filepath.Join(side, fmt.Sprintf("plasma-bench-build-%d-%d", os.Getpid(), run))
			d, p, output, err := buildOnce(ctx, dir, src, o.Jobs)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", side, err)
			}
			if s == 0 {
				prog, out = p, output
			} else if !bytes.Equal(output, out) || !bytes.Equal(p, prog) {
				return nil, fmt.Errorf("the build in %s differs from the build in %s (program output %q vs %q, binary %d vs %d bytes)",
					side, sides[0], output, out, len(p), len(prog))
			}
			for ph := range buildPhases {
				times[s][ph] = append(times[s][ph], float64(d[ph].Microseconds())/1000)
			}
		}
	}
	target := DescribeDir(o.Target)
	for ph, p := range buildPhases {
		name := strings.Replace(p.name, "-jN", fmt.Sprintf("-j%d", o.Jobs), 1)
		ours := median(times[0][ph])
		if len(sides) == 1 {
			rep.add(Result{Name: name, Unit: "ms", Ours: ours, RefName: target, Seed: p.seed})
		}
		for s := 1; s < len(sides); s++ {
			rep.add(Result{Name: name, Unit: "ms", Ours: ours, RefName: DescribeDir(sides[s]), Ref: median(times[s][ph]), Seed: p.seed,
				Note: "time ÷ reference time, lower is better"})
		}
	}
	rep.Params += "; ours: " + target
	return rep, nil
}

// buildOnce writes the project into dir (which must not exist), builds it
// and removes it, returning the time of each phase, the program and its
// output.
func buildOnce(ctx context.Context, dir string, src map[string]string, jobs int) (d [4]time.Duration, prog, out []byte, err error) {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return d, nil, nil, err
	}
	defer os.RemoveAll(dir) // on errors; the last phase removes it otherwise
	names := make([]string, 0, len(src))
	for n := range src {
		names = append(names, n)
	}
	sort.Strings(names)
	if d[0], err = timeIt(func() error {
		for _, n := range names {
			if err := os.WriteFile(filepath.Join(dir, n), []byte(src[n]), 0o644); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return d, nil, nil, fmt.Errorf("write the sources: %w", err)
	}
	// Seed 003: make clean; find . -type f -exec cat {} > /dev/null; sync; time make -j8 all.
	if _, err := runMake(ctx, dir, "clean"); err != nil {
		return d, nil, nil, err
	}
	for _, n := range names {
		f, err := os.Open(filepath.Join(dir, n))
		if err != nil {
			return d, nil, nil, err
		}
		_, err = io.Copy(io.Discard, f)
		f.Close()
		if err != nil {
			return d, nil, nil, err
		}
	}
	unix.Sync()
	if d[1], err = timeIt(func() error { _, err := runMake(ctx, dir, fmt.Sprintf("-j%d", jobs), "all"); return err }); err != nil {
		return d, nil, nil, err
	}
	var again []byte
	if d[2], err = timeIt(func() error { again, err = runMake(ctx, dir, fmt.Sprintf("-j%d", jobs), "all"); return err }); err != nil {
		return d, nil, nil, err
	}
	if !bytes.Contains(again, []byte("Nothing to be done")) {
		return d, nil, nil, fmt.Errorf("the second make in %s rebuilt something:\n%s", dir, again)
	}
	if prog, err = os.ReadFile(filepath.Join(dir, "prog")); err != nil {
		return d, nil, nil, err
	}
	cmd := exec.CommandContext(ctx, "./prog")
	cmd.Dir = dir
	if out, err = cmd.Output(); err != nil {
		return d, nil, nil, fmt.Errorf("run the built program: %w", err)
	}
	if d[3], err = timeIt(func() error { return os.RemoveAll(dir) }); err != nil {
		return d, nil, nil, err
	}
	return d, prog, out, nil
}

func runMake(ctx context.Context, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "make", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("make %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return out, nil
}

// generateProject returns the files of a C project of n modules: modNN.c
// and modNN.h (a few functions with loops, tables and switches, so that
// each compiles in a noticeable fraction of a second at -O2), common.h,
// main.c calling every module, and a Makefile that builds libmods.a and
// prog from them, with header dependencies. Deterministic: the same n
// gives the same files, and the same program wherever it is built.
func generateProject(n int) map[string]string {
	files := map[string]string{}
	files["common.h"] = `#ifndef COMMON_H
#define COMMON_H
#include <stddef.h>
#include <stdint.h>
#define ROUNDS 64
static inline uint64_t mix64(uint64_t x) {
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}
struct acc {
	uint64_t sum, xor;
	uint32_t count;
};
void acc_add(struct acc *a, uint64_t v);
#endif
`
	var mods, objs []string
	var main strings.Builder
	main.WriteString("#include <stdio.h>\n#include \"common.h\"\n")
	for i := 0; i < n; i++ {
		m := fmt.Sprintf("mod%02d", i)
		mods = append(mods, m)
		objs = append(objs, m+".o")
		main.WriteString(fmt.Sprintf("#include \"%s.h\"\n", m))
		files[m+".h"] = fmt.Sprintf("#ifndef %[1]s_H\n#define %[1]s_H\n#include \"common.h\"\nuint64_t %[2]s_run(uint64_t seed);\n#endif\n", strings.ToUpper(m), m)
		var c strings.Builder
		fmt.Fprintf(&c, "#include <string.h>\n#include <stdlib.h>\n#include \"%s.h\"\n\n", m)
		fmt.Fprintf(&c, "static const uint32_t table_%s[32] = {", m)
		for k := 0; k < 32; k++ {
			if k > 0 {
				c.WriteString(", ")
			}
			fmt.Fprintf(&c, "%du", (uint32(i+1)*2654435761+uint32(k)*40503)%100003)
		}
		c.WriteString("};\n\n")
		for f := 0; f < 3; f++ {
			fmt.Fprintf(&c, "static uint64_t %s_f%d(uint64_t x, const uint8_t *buf, size_t len) {\n", m, f)
			c.WriteString("\tuint64_t h = x;\n\tfor (size_t i = 0; i < len; i++) {\n\t\tswitch ((buf[i] + i) % 5) {\n")
			for k := 0; k < 5; k++ {
				fmt.Fprintf(&c, "\t\tcase %d: h = mix64(h + buf[i] * %du + table_%s[(i + %d) %% 32]); break;\n", k, 3+2*k+f, m, k+f)
			}
			c.WriteString("\t\t}\n\t}\n")
			fmt.Fprintf(&c, "\tfor (int r = 0; r < ROUNDS; r++)\n\t\th = (h << %d | h >> %d) ^ mix64(h + r);\n\treturn h;\n}\n\n", 7+f, 57-f)
		}
		fmt.Fprintf(&c, "uint64_t %s_run(uint64_t seed) {\n\tuint8_t buf[256];\n\tstruct acc a;\n\tmemset(&a, 0, sizeof a);\n", m)
		c.WriteString("\tfor (size_t i = 0; i < sizeof buf; i++)\n\t\tbuf[i] = (uint8_t)mix64(seed + i);\n")
		for f := 0; f < 3; f++ {
			fmt.Fprintf(&c, "\tacc_add(&a, %s_f%d(seed + %d, buf, sizeof buf));\n", m, f, f)
		}
		c.WriteString("\treturn a.sum ^ a.xor ^ a.count;\n}\n")
		files[m+".c"] = c.String()
	}
	main.WriteString(`
void acc_add(struct acc *a, uint64_t v) {
	a->sum += v;
	a->xor ^= mix64(v);
	a->count++;
}

int main(void) {
	uint64_t h = 0;
`)
	for _, m := range mods {
		fmt.Fprintf(&main, "\th = mix64(h ^ %s_run(h));\n", m)
	}
	main.WriteString("\tprintf(\"%016llx\\n\", (unsigned long long)h);\n\treturn 0;\n}\n")
	files["main.c"] = main.String()
	var mk strings.Builder
	mk.WriteString("# Generated by plasma-bench build.\nCC = cc\nCFLAGS = -O2 -Wall\n")
	fmt.Fprintf(&mk, "MODS = %s\n\n", strings.Join(objs, " "))
	mk.WriteString("all: prog\n\nprog: main.o libmods.a\n\t$(CC) -o $@ main.o libmods.a\n\n")
	mk.WriteString("libmods.a: $(MODS)\n\trm -f $@\n\tar rcsD $@ $(MODS)\n\n")
	mk.WriteString("main.o: main.c common.h $(MODS:.o=.h)\n\t$(CC) $(CFLAGS) -c -o $@ main.c\n\n")
	mk.WriteString("mod%.o: mod%.c mod%.h common.h\n\t$(CC) $(CFLAGS) -c -o $@ $<\n\n")
	mk.WriteString("clean:\n\trm -f prog libmods.a *.o\n\n.PHONY: all clean\n")
	files["Makefile"] = mk.String()
	return files
}
