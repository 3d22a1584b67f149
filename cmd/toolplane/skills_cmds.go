package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	skillsv1 "github.com/toolplane/toolplane/gen/go/toolplane/skills/v1"
)

// newSkillsCmd returns `toolplane skills list|get|install|scan|review|enable|
// disable|history|rollback|delete`, clients of a running suite's
// SkillsService (docs/architecture.md §2.3). The user is the token's principal.
func newSkillsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "skills", Short: "Install, inspect, scan and manage skills"}
	cf := addClientFlags(cmd)
	var asJSON bool
	addOutputFlags(cmd.PersistentFlags(), &asJSON)
	client := func() (skillsv1.SkillsServiceClient, func(), error) {
		cc, err := cf.dial()
		if err != nil {
			return nil, nil, err
		}
		return skillsv1.NewSkillsServiceClient(cc), func() { cc.Close() }, nil
	}

	var category string
	var enabledOnly bool
	list := &cobra.Command{
		Use: "list", Short: "List the skills you can see (custom skills shadow public ones)", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cat, err := parseCategory(category)
			if err != nil {
				return err
			}
			sc, done, err := client()
			if err != nil {
				return err
			}
			defer done()
			r, err := sc.ListSkills(callCtx(c), &skillsv1.ListSkillsRequest{Category: cat, EnabledOnly: enabledOnly})
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(c.OutOrStdout(), r)
			}
			tw := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tCATEGORY\tENABLED\tEDITABLE\tVERSION\tPROBLEMS\tDESCRIPTION")
			for _, s := range r.GetSkills() {
				fmt.Fprintf(tw, "%s\t%s\t%v\t%v\t%d\t%d\t%s\n", s.GetName(), shortCategory(s.GetCategory()), s.GetEnabled(),
					s.GetEditable(), s.GetVersion(), len(s.GetProblems()), clip(s.GetDescription(), 70))
			}
			return tw.Flush()
		},
	}
	list.Flags().StringVar(&category, "category", "", "only public, integration or custom skills")
	list.Flags().BoolVar(&enabledOnly, "enabled", false, "only enabled skills")
	cmd.AddCommand(list)

	cmd.AddCommand(&cobra.Command{
		Use: "get NAME", Short: "Show one skill, with problems found in its SKILL.md", Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, a []string) error {
			sc, done, err := client()
			if err != nil {
				return err
			}
			defer done()
			r, err := sc.GetSkill(callCtx(c), &skillsv1.GetSkillRequest{Name: a[0]})
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(c.OutOrStdout(), r.GetSkill())
			}
			printSkill(c.OutOrStdout(), r.GetSkill())
			return nil
		},
	})

	var integration bool
	install := &cobra.Command{
		Use:   "install PATH",
		Short: "Install a skill from a .zip, .tar.gz/.tgz/.skill archive or a folder; prints the scan findings",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, a []string) error {
			req := &skillsv1.InstallSkillRequest{}
			if integration {
				req.Category = skillsv1.SkillCategory_SKILL_CATEGORY_INTEGRATION
			}
			src, err := readSkillSource(a[0], c.ErrOrStderr())
			if err != nil {
				return err
			}
			if src.archive != nil {
				req.Source = &skillsv1.InstallSkillRequest_Archive{Archive: src.archive}
			} else {
				req.Source = &skillsv1.InstallSkillRequest_Files{Files: src.files}
			}
			sc, done, err := client()
			if err != nil {
				return err
			}
			defer done()
			fmt.Fprintf(c.ErrOrStderr(), "uploading %s; the server validates and scans it ...\n", humanBytes(src.size))
			r, err := sc.InstallSkill(callCtx(c), req)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(c.OutOrStdout(), r)
			}
			fmt.Fprintf(c.OutOrStdout(), "installed %s (%s, version %d, digest %s)\n", r.GetSkill().GetName(),
				shortCategory(r.GetSkill().GetCategory()), r.GetSkill().GetVersion(), short(r.GetSkill().GetDigest()))
			printFindings(c.OutOrStdout(), r.GetReport())
			return nil
		},
	}
	install.Flags().BoolVar(&integration, "integration", false, "install as a read-only integration skill for everyone (admin)")
	cmd.AddCommand(install)

	var format, scanName string
	scan := &cobra.Command{
		Use:   "scan [PATH]",
		Short: "Scan an archive, a folder or an installed skill (--name) without installing; exit 1 when blocked",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, a []string) error {
			req := &skillsv1.ScanSkillRequest{}
			switch strings.ToLower(format) {
			case "", "table":
			case "json":
				req.Format = skillsv1.ScanFormat_SCAN_FORMAT_JSON
			case "sarif":
				req.Format = skillsv1.ScanFormat_SCAN_FORMAT_SARIF
			default:
				return fmt.Errorf("--format: %q is not one of table, json, sarif", format)
			}
			switch {
			case scanName != "" && len(a) == 0:
				req.Source = &skillsv1.ScanSkillRequest_Name{Name: scanName}
			case scanName == "" && len(a) == 1:
				src, err := readSkillSource(a[0], c.ErrOrStderr())
				if err != nil {
					return err
				}
				if src.archive != nil {
					req.Source = &skillsv1.ScanSkillRequest_Archive{Archive: src.archive}
				} else {
					req.Source = &skillsv1.ScanSkillRequest_Files{Files: src.files}
				}
			default:
				return errors.New("give either PATH or --name")
			}
			sc, done, err := client()
			if err != nil {
				return err
			}
			defer done()
			r, err := sc.ScanSkill(callCtx(c), req)
			if err != nil {
				return err
			}
			switch {
			case asJSON:
				err = printJSON(c.OutOrStdout(), r)
			case req.Format != skillsv1.ScanFormat_SCAN_FORMAT_UNSPECIFIED:
				_, err = fmt.Fprintln(c.OutOrStdout(), r.GetFormatted())
			default:
				printFindings(c.OutOrStdout(), r.GetReport())
			}
			if err == nil && r.GetReport().GetBlocked() {
				return &exitError{code: 1, err: errors.New("scan: blocked by CRITICAL findings")}
			}
			return err
		},
	}
	scan.Flags().StringVar(&format, "format", "table", "table, json or sarif (SARIF 2.1.0)")
	scan.Flags().StringVar(&scanName, "name", "", "scan an installed skill by name")
	cmd.AddCommand(scan)

	var reviewName string
	var content, modelText bool
	review := &cobra.Command{
		Use:   "review [PATH]",
		Short: "Review a package read-only (facts and findings); nothing is installed",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, a []string) error {
			req := &skillsv1.ReviewSkillPackageRequest{IncludeContent: content}
			switch {
			case reviewName != "" && len(a) == 0:
				req.Source = &skillsv1.ReviewSkillPackageRequest_Name{Name: reviewName}
			case reviewName == "" && len(a) == 1:
				src, err := readSkillSource(a[0], c.ErrOrStderr())
				if err != nil {
					return err
				}
				if src.archive != nil {
					req.Source = &skillsv1.ReviewSkillPackageRequest_Archive{Archive: src.archive}
				} else {
					req.Source = &skillsv1.ReviewSkillPackageRequest_Files{Files: src.files}
				}
			default:
				return errors.New("give either PATH or --name")
			}
			sc, done, err := client()
			if err != nil {
				return err
			}
			defer done()
			r, err := sc.ReviewSkillPackage(callCtx(c), req)
			if err != nil {
				return err
			}
			switch {
			case asJSON:
				return printJSON(c.OutOrStdout(), r)
			case modelText:
				_, err = fmt.Fprintln(c.OutOrStdout(), r.GetText())
				return err
			}
			var full struct {
				Markdown string `json:"markdown"`
			}
			if json.Unmarshal([]byte(r.GetFullReport()), &full) == nil && full.Markdown != "" {
				_, err = fmt.Fprint(c.OutOrStdout(), full.Markdown)
				return err
			}
			return printJSON(c.OutOrStdout(), r.GetFacts())
		},
	}
	review.Flags().StringVar(&reviewName, "name", "", "review an installed skill by name")
	review.Flags().BoolVar(&content, "content", false, "include file contents in the model-visible text")
	review.Flags().BoolVar(&modelText, "model-text", false, "print the model-visible text instead of the Markdown report")
	cmd.AddCommand(review)

	for _, on := range []bool{true, false} {
		on := on
		use, short := "disable NAME", "Disable a skill (public: for everyone, admin; others: for you)"
		if on {
			use, short = "enable NAME", "Enable a skill; it is re-scanned with the current rules"
		}
		cmd.AddCommand(&cobra.Command{
			Use: use, Short: short, Args: cobra.ExactArgs(1),
			RunE: func(c *cobra.Command, a []string) error {
				sc, done, err := client()
				if err != nil {
					return err
				}
				defer done()
				r, err := sc.UpdateSkill(callCtx(c), &skillsv1.UpdateSkillRequest{Name: a[0], Skill: &skillsv1.SkillUpdate{Enabled: &on}})
				if err != nil {
					return err
				}
				if asJSON {
					return printJSON(c.OutOrStdout(), r)
				}
				fmt.Fprintf(c.OutOrStdout(), "%s: enabled=%v\n", r.GetSkill().GetName(), r.GetSkill().GetEnabled())
				if r.GetReport() != nil {
					printFindings(c.OutOrStdout(), r.GetReport())
				}
				return nil
			},
		})
	}

	cmd.AddCommand(&cobra.Command{
		Use: "history NAME", Short: "Show a skill's versions and events, newest first", Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, a []string) error {
			sc, done, err := client()
			if err != nil {
				return err
			}
			defer done()
			r, err := sc.ListSkillHistory(callCtx(c), &skillsv1.ListSkillHistoryRequest{Name: a[0]})
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(c.OutOrStdout(), r)
			}
			tw := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "VERSION\tACTION\tAUTHOR\tTIME\tDIGEST\tSCAN")
			for _, e := range r.GetEntries() {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", e.GetVersion(), e.GetAction(), e.GetAuthor(),
					e.GetTime().AsTime().Format("2006-01-02 15:04:05Z"), short(e.GetDigest()), e.GetScanDecision())
			}
			return tw.Flush()
		},
	})

	cmd.AddCommand(&cobra.Command{
		Use: "rollback NAME VERSION", Short: "Restore an earlier version of one of your custom skills (re-scanned)", Args: cobra.ExactArgs(2),
		RunE: func(c *cobra.Command, a []string) error {
			v, err := strconv.Atoi(a[1])
			if err != nil || v < 1 {
				return fmt.Errorf("VERSION: %q is not a version number", a[1])
			}
			sc, done, err := client()
			if err != nil {
				return err
			}
			defer done()
			r, err := sc.RollbackSkill(callCtx(c), &skillsv1.RollbackSkillRequest{Name: a[0], Version: int32(v)})
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(c.OutOrStdout(), r)
			}
			fmt.Fprintf(c.OutOrStdout(), "%s restored from version %d as version %d\n", r.GetSkill().GetName(), v, r.GetSkill().GetVersion())
			printFindings(c.OutOrStdout(), r.GetReport())
			return nil
		},
	})

	cmd.AddCommand(&cobra.Command{
		Use: "delete NAME", Short: "Delete one of your custom skills", Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, a []string) error {
			sc, done, err := client()
			if err != nil {
				return err
			}
			defer done()
			if _, err := sc.DeleteSkill(callCtx(c), &skillsv1.DeleteSkillRequest{Name: a[0]}); err != nil {
				return err
			}
			fmt.Fprintf(c.OutOrStdout(), "deleted %s\n", a[0])
			return nil
		},
	})
	return cmd
}

// skillSource is what install, scan and review send.
type skillSource struct {
	archive []byte
	files   *skillsv1.InlineFiles
	size    int64
}

// progressEvery is the archive size above which reading shows progress.
const progressEvery = 1 << 20

// readSkillSource reads an archive file (with progress on w for large ones)
// or a folder (as inline files named after the folder).
func readSkillSource(p string, w io.Writer) (*skillSource, error) {
	st, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		in := &skillsv1.InlineFiles{Name: filepath.Base(filepath.Clean(p))}
		var size int64
		err := filepath.WalkDir(p, func(fp string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if fp != p && strings.HasPrefix(d.Name(), ".") {
					return filepath.SkipDir
				}
				return nil
			}
			if !d.Type().IsRegular() {
				return fmt.Errorf("%s: only regular files can be installed (symlinks and devices are refused)", fp)
			}
			data, err := os.ReadFile(fp)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(p, fp)
			size += int64(len(data))
			in.Files = append(in.Files, &skillsv1.SkillFile{Path: filepath.ToSlash(rel), Content: data})
			return nil
		})
		if err != nil {
			return nil, err
		}
		return &skillSource{files: in, size: size}, nil
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var r io.Reader = f
	if st.Size() > progressEvery {
		r = &progressReader{r: f, total: st.Size(), w: w, name: filepath.Base(p)}
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	return &skillSource{archive: data, size: int64(len(data))}, nil
}

// progressReader prints "reading NAME: 40% (20.0 MiB of 50.0 MiB)" at every 10%.
type progressReader struct {
	r         io.Reader
	w         io.Writer
	name      string
	total, n  int64
	lastTenth int64
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.n += int64(n)
	if tenth := p.n * 10 / p.total; tenth > p.lastTenth {
		p.lastTenth = tenth
		fmt.Fprintf(p.w, "reading %s: %d%% (%s of %s)\n", p.name, tenth*10, humanBytes(p.n), humanBytes(p.total))
	}
	return n, err
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

func parseCategory(s string) (skillsv1.SkillCategory, error) {
	if s == "" {
		return skillsv1.SkillCategory_SKILL_CATEGORY_UNSPECIFIED, nil
	}
	v, ok := skillsv1.SkillCategory_value["SKILL_CATEGORY_"+strings.ToUpper(s)]
	if !ok {
		return 0, fmt.Errorf("--category: %q is not one of public, integration, custom", s)
	}
	return skillsv1.SkillCategory(v), nil
}

func shortCategory(c skillsv1.SkillCategory) string {
	return strings.ToLower(strings.TrimPrefix(c.String(), "SKILL_CATEGORY_"))
}

func short(digest string) string {
	if len(digest) > 12 {
		return digest[:12]
	}
	return digest
}

func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-3]) + "..."
	}
	return s
}

func printSkill(w io.Writer, s *skillsv1.Skill) {
	fmt.Fprintf(w, "name:        %s\ncategory:    %s\nenabled:     %v\neditable:    %v\nversion:     %d\ndigest:      %s\npath:        %s\n",
		s.GetName(), shortCategory(s.GetCategory()), s.GetEnabled(), s.GetEditable(), s.GetVersion(), s.GetDigest(), s.GetPath())
	if s.GetOwner() != "" {
		fmt.Fprintf(w, "owner:       %s\n", s.GetOwner())
	}
	fmt.Fprintf(w, "description: %s\n", s.GetDescription())
	switch {
	case !s.GetHasAllowedTools():
		fmt.Fprintln(w, "tools:       (not restricted)")
	case len(s.GetAllowedTools()) == 0:
		fmt.Fprintln(w, "tools:       (none: no business tools)")
	default:
		fmt.Fprintf(w, "tools:       %s\n", strings.Join(s.GetAllowedTools(), ", "))
	}
	fmt.Fprintf(w, "files:       %s\n", strings.Join(s.GetFiles(), ", "))
	for _, p := range s.GetProblems() {
		fmt.Fprintf(w, "problem:     %s (line %d, column %d): %s\n", p.GetField(), p.GetLine(), p.GetColumn(), p.GetMessage())
	}
}

func printFindings(w io.Writer, r *skillsv1.ScanReport) {
	if len(r.GetFindings()) == 0 {
		fmt.Fprintln(w, "scan: no findings")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEVERITY\tRULE\tLOCATION\tMESSAGE\tEVIDENCE")
	for _, f := range r.GetFindings() {
		loc := f.GetFile()
		if f.GetLine() > 0 {
			loc = fmt.Sprintf("%s:%d", f.GetFile(), f.GetLine())
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", strings.TrimPrefix(f.GetSeverity().String(), "SEVERITY_"), f.GetRuleId(), loc,
			clip(f.GetMessage(), 60), clip(f.GetEvidence(), 40))
	}
	tw.Flush()
	verdict := "not blocked"
	if r.GetBlocked() {
		verdict = "BLOCKED (CRITICAL findings)"
	}
	fmt.Fprintf(w, "scan: %d finding(s), %s\n", len(r.GetFindings()), verdict)
}
