// Package deploy_test checks the deployment files of deploy/ without a
// container engine or a cluster (none runs on these machines): it parses the
// Dockerfile, the compose files and the kustomize manifests and asserts their
// invariants — images, non-root users, health checks and probes, ports,
// volumes and PVCs, replicas, resources, config and secrets — and loads every
// toolplane.yaml they ship through the real config decoder and validator.
package deploy_test

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"

	"github.com/toolplane/toolplane/internal/app"
	"github.com/toolplane/toolplane/internal/config"
)

const deployDir = "../../deploy"

var services = []string{"catalog", "authz", "skills", "runtime"}

func read(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(deployDir, rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// stage is one FROM section of the Dockerfile.
type stage struct {
	name, from string
	lines      []string
}

func dockerStages(t *testing.T) map[string]*stage {
	t.Helper()
	stages := map[string]*stage{}
	var cur *stage
	sc := bufio.NewScanner(bytes.NewReader(read(t, "Dockerfile")))
	var cont string
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cont += strings.TrimSuffix(line, "\\") + " "
			continue
		}
		line, cont = cont+line, ""
		f := strings.Fields(line)
		if strings.EqualFold(f[0], "FROM") {
			if len(f) != 4 || !strings.EqualFold(f[2], "AS") {
				t.Fatalf("FROM without a stage name: %q", line)
			}
			cur = &stage{name: f[3], from: f[1]}
			stages[cur.name] = cur
			continue
		}
		if cur != nil {
			cur.lines = append(cur.lines, line)
		}
	}
	return stages
}

func instr(s *stage, kw string) []string {
	var out []string
	for _, l := range s.lines {
		if f := strings.Fields(l); strings.EqualFold(f[0], kw) {
			out = append(out, strings.TrimSpace(l[len(f[0]):]))
		}
	}
	return out
}

func TestDockerfile(t *testing.T) {
	st := dockerStages(t)
	build := st["build"]
	if build == nil {
		t.Fatal("no build stage")
	}
	// The builder's Go is go.mod's.
	gomod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	goVer := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(gomod)
	df := string(read(t, "Dockerfile"))
	if goVer == nil || !strings.Contains(df, "ARG GO_VERSION="+string(goVer[1])) {
		t.Errorf("Dockerfile GO_VERSION is not go.mod's %s", goVer[1])
	}
	runs := strings.Join(instr(build, "RUN"), "\n")
	if !strings.Contains(runs, "CGO_ENABLED=0") || !strings.Contains(runs, "./cmd/toolplane") {
		t.Errorf("build stage does not build ./cmd/toolplane with CGO_ENABLED=0: %s", runs)
	}
	for _, name := range []string{"slim", "node"} {
		s := st[name]
		if s == nil {
			t.Fatalf("no %s stage", name)
		}
		users := instr(s, "USER")
		if len(users) == 0 {
			t.Errorf("%s: no USER", name)
		} else if u := strings.Split(users[len(users)-1], ":")[0]; u == "0" || u == "root" {
			t.Errorf("%s runs as root", name)
		}
		hc := instr(s, "HEALTHCHECK")
		if len(hc) != 1 || !strings.Contains(hc[0], `"/usr/local/bin/toolplane", "healthcheck"`) {
			t.Errorf("%s: HEALTHCHECK is not toolplane healthcheck: %v", name, hc)
		}
		if ep := instr(s, "ENTRYPOINT"); len(ep) != 1 || ep[0] != `["/usr/local/bin/toolplane"]` {
			t.Errorf("%s: ENTRYPOINT %v", name, ep)
		}
		if ex := instr(s, "EXPOSE"); len(ex) != 1 || ex[0] != "7420 7421" {
			t.Errorf("%s: EXPOSE %v, want 7420 7421", name, ex)
		}
		copies := strings.Join(instr(s, "COPY"), "\n")
		if !strings.Contains(copies, "--from=build /out/toolplane /usr/local/bin/toolplane") {
			t.Errorf("%s does not take the binary from the build stage", name)
		}
	}
	if !strings.Contains(st["slim"].from, "distroless/static") {
		t.Errorf("slim is not distroless static: %s", st["slim"].from)
	}
	if !strings.HasPrefix(st["node"].from, "node:") || !strings.Contains(strings.Join(instr(st["node"], "COPY"), "\n"), "--from=npm") {
		t.Errorf("node stage lacks Node or the npm MCP servers")
	}
	// The default target (last stage) is the one with Node: all-in-one needs it.
	if idxSlim, idxNode := strings.Index(df, "AS slim"), strings.Index(df, "AS node"); idxNode < idxSlim {
		t.Error("the node stage must be last (the default target)")
	}
}

// loadConfig decodes, defaults and validates a shipped toolplane.yaml.
func loadConfig(t *testing.T, rel string) *app.Config {
	t.Helper()
	// The files mounted beside toolplane.yaml (/etc/toolplane/...) are the
	// ones in k8s/config: validation opens them there.
	abs, err := filepath.Abs(filepath.Join(deployDir, "k8s", "config"))
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.ReplaceAll(read(t, rel), []byte("/etc/toolplane/"), []byte(abs+"/"))
	var c app.Config
	if err := config.Decode(data, &c); err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
	c.SetDefaults()
	if err := c.Validate(); err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
	if !c.Auth.Enabled || config.IsLoopback(c.Server.GRPCAddr) {
		t.Errorf("%s: a container config listens beyond loopback and must enable auth", rel)
	}
	if c.Server.DataDir != "/data" {
		t.Errorf("%s: data_dir %q, want /data (the volume)", rel, c.Server.DataDir)
	}
	if c.Server.GRPCAddr != "0.0.0.0:7420" || c.Server.HTTPAddr != "0.0.0.0:7421" {
		t.Errorf("%s: listeners %s %s, want 0.0.0.0:7420 and 0.0.0.0:7421", rel, c.Server.GRPCAddr, c.Server.HTTPAddr)
	}
	return &c
}

func serviceTokenHash(t *testing.T) string {
	t.Helper()
	sum := sha256.Sum256(bytes.TrimSpace(read(t, "k8s/secrets/service-token")))
	return hex.EncodeToString(sum[:])
}

func TestConfigs(t *testing.T) {
	want := serviceTokenHash(t)
	for _, svc := range services {
		c := loadConfig(t, "k8s/config/"+svc+".yaml")
		if !slices.Equal(c.Server.Services, []string{svc}) {
			t.Errorf("%s.yaml serves %v", svc, c.Server.Services)
		}
		found := false
		for _, tok := range c.Auth.Tokens {
			if tok.Kind == "service" && tok.SHA256 == want {
				found = true
			}
		}
		if !found {
			t.Errorf("%s.yaml does not accept the runtime's service token (sha256 of k8s/secrets/service-token)", svc)
		}
	}
	rt := loadConfig(t, "k8s/config/runtime.yaml")
	for _, up := range []string{"catalog", "authz", "skills"} {
		u := rt.Runtime.Upstream(up)
		if u.Address != up+":7420" || u.TokenFile != "/run/secrets/toolplane/service-token" {
			t.Errorf("runtime upstream %s = %s token_file %s", up, u.Address, u.TokenFile)
		}
	}
	all := loadConfig(t, "config/all-in-one.yaml")
	if len(all.Server.Services) != 4 {
		t.Errorf("all-in-one serves %v", all.Server.Services)
	}
}

type composeFile struct {
	Services map[string]struct {
		Build *struct {
			Context, Dockerfile, Target string
		} `yaml:"build"`
		Image       string         `yaml:"image"`
		User        string         `yaml:"user"`
		ReadOnly    bool           `yaml:"read_only"`
		Ports       []string       `yaml:"ports"`
		Volumes     []string       `yaml:"volumes"`
		Healthcheck map[string]any `yaml:"healthcheck"`
		Secrets     []struct {
			Source, Target string
		} `yaml:"secrets"`
	} `yaml:"services"`
	Volumes map[string]any `yaml:"volumes"`
	Secrets map[string]struct {
		File string `yaml:"file"`
	} `yaml:"secrets"`
}

func parseCompose(t *testing.T, rel string) composeFile {
	t.Helper()
	var c composeFile
	if err := yaml.Unmarshal(read(t, rel), &c); err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
	return c
}

func checkCompose(t *testing.T, rel string, c composeFile, stages map[string]*stage) {
	t.Helper()
	for name, s := range c.Services {
		if s.Build == nil || stages[s.Build.Target] == nil || s.Build.Dockerfile != "deploy/Dockerfile" {
			t.Errorf("%s %s: build target %+v is not a Dockerfile stage", rel, name, s.Build)
			continue
		}
		wantImage := map[string]string{"node": "toolplane/toolplane-node:0.1.0", "slim": "toolplane/toolplane:0.1.0"}[s.Build.Target]
		if s.Image != wantImage {
			t.Errorf("%s %s: image %q, want %q", rel, name, s.Image, wantImage)
		}
		if u := strings.Split(s.User, ":")[0]; u == "" || u == "0" || u == "root" {
			t.Errorf("%s %s: user %q is not a non-root uid", rel, name, s.User)
		}
		if !s.ReadOnly {
			t.Errorf("%s %s: root filesystem not read-only", rel, name)
		}
		test, _ := s.Healthcheck["test"].([]any)
		if len(test) < 3 || test[1] != "/usr/local/bin/toolplane" || test[2] != "healthcheck" {
			t.Errorf("%s %s: healthcheck %v is not toolplane healthcheck", rel, name, test)
		}
		var data, cfg bool
		for _, v := range s.Volumes {
			parts := strings.Split(v, ":")
			src, dst := parts[0], parts[1]
			if dst == "/data" {
				if _, ok := c.Volumes[src]; !ok {
					t.Errorf("%s %s: /data is not a named volume: %s", rel, name, v)
				}
				data = true
				continue
			}
			if strings.HasPrefix(src, ".") {
				if _, err := os.Stat(filepath.Join(deployDir, src)); err != nil {
					t.Errorf("%s %s: bind source missing: %v", rel, name, err)
				}
			}
			if dst == "/etc/toolplane/toolplane.yaml" {
				cfg = true
				loadConfig(t, strings.TrimPrefix(src, "./"))
			}
		}
		if !data || !cfg {
			t.Errorf("%s %s: data volume %v, config %v", rel, name, data, cfg)
		}
		for _, p := range s.Ports {
			if !strings.HasPrefix(p, "127.0.0.1:") {
				t.Errorf("%s %s: port %s published beyond loopback", rel, name, p)
			}
		}
	}
}

func TestComposeAllInOne(t *testing.T) {
	c := parseCompose(t, "compose.yaml")
	checkCompose(t, "compose.yaml", c, dockerStages(t))
	s, ok := c.Services["toolplane"]
	if !ok || len(c.Services) != 1 {
		t.Fatalf("all-in-one has services %v", c.Services)
	}
	if s.Build.Target != "node" {
		t.Error("all-in-one must use the node image (the catalog starts stdio MCP servers)")
	}
	if !slices.Contains(s.Ports, "127.0.0.1:7420:7420") || !slices.Contains(s.Ports, "127.0.0.1:7421:7421") {
		t.Errorf("ports %v", s.Ports)
	}
}

func TestComposeSplit(t *testing.T) {
	c := parseCompose(t, "compose.split.yaml")
	checkCompose(t, "compose.split.yaml", c, dockerStages(t))
	for _, svc := range services {
		if _, ok := c.Services[svc]; !ok {
			t.Fatalf("split has no %s service", svc)
		}
	}
	if c.Services["catalog"].Build.Target != "node" {
		t.Error("the split catalog must use the node image")
	}
	seen := map[string]string{}
	for name, s := range c.Services {
		for _, v := range s.Volumes {
			if strings.HasSuffix(v, ":/data") {
				vol := strings.Split(v, ":")[0]
				if other, dup := seen[vol]; dup {
					t.Errorf("%s and %s share the data volume %s (one writer per store)", name, other, vol)
				}
				seen[vol] = name
			}
		}
	}
	rt := c.Services["runtime"]
	if len(rt.Secrets) != 1 || rt.Secrets[0].Target != "/run/secrets/toolplane/service-token" {
		t.Errorf("runtime secrets %+v", rt.Secrets)
	}
	if f := c.Secrets[rt.Secrets[0].Source].File; f != "./k8s/secrets/service-token" {
		t.Errorf("service-token secret file %q", f)
	}
	if len(rt.Ports) != 2 {
		t.Errorf("the runtime is the entry point: ports %v", rt.Ports)
	}
}

// obj is a loosely typed Kubernetes object.
type obj = map[string]any

func get(o any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := o.(obj)
			if !ok {
				return nil
			}
			o = m[k]
		case int:
			l, ok := o.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			o = l[k]
		}
	}
	return o
}

func str(o any, path ...any) string { s, _ := get(o, path...).(string); return s }

func TestKustomize(t *testing.T) {
	var k obj
	if err := yaml.Unmarshal(read(t, "k8s/kustomization.yaml"), &k); err != nil {
		t.Fatal(err)
	}
	byKind := map[string]map[string]obj{}
	for _, r := range get(k, "resources").([]any) {
		dec := yaml.NewDecoder(bytes.NewReader(read(t, "k8s/"+r.(string))))
		for {
			var o obj
			if err := dec.Decode(&o); err != nil {
				break
			}
			kind, name := str(o, "kind"), str(o, "metadata", "name")
			if byKind[kind] == nil {
				byKind[kind] = map[string]obj{}
			}
			if _, dup := byKind[kind][name]; dup {
				t.Errorf("duplicate %s/%s", kind, name)
			}
			byKind[kind][name] = o
		}
	}
	// Generated ConfigMap and Secret: their files exist.
	cmKeys := map[string]bool{}
	for _, g := range get(k, "configMapGenerator").([]any) {
		if str(g, "name") != "toolplane-config" {
			continue
		}
		for _, f := range get(g, "files").([]any) {
			if _, err := os.Stat(filepath.Join(deployDir, "k8s", f.(string))); err != nil {
				t.Error(err)
			}
			cmKeys[filepath.Base(f.(string))] = true
		}
	}
	secretKeys := map[string]bool{}
	for _, g := range get(k, "secretGenerator").([]any) {
		for _, f := range get(g, "files").([]any) {
			secretKeys[str(g, "name")+"/"+filepath.Base(f.(string))] = true
		}
	}
	images := map[string]string{}
	for _, im := range get(k, "images").([]any) {
		images[str(im, "name")] = str(im, "newTag")
	}

	for _, svc := range services {
		d := byKind["Deployment"][svc]
		if d == nil {
			t.Fatalf("no Deployment %s", svc)
		}
		if r, _ := get(d, "spec", "replicas").(int); r != 1 {
			t.Errorf("%s: replicas %v, want 1 (one writer per sqlite store; docs/architecture.md §1)", svc, get(d, "spec", "replicas"))
		}
		if str(d, "spec", "strategy", "type") != "Recreate" {
			t.Errorf("%s: strategy must be Recreate (the RWO volume has one writer)", svc)
		}
		pod := get(d, "spec", "template", "spec")
		if str(d, "spec", "selector", "matchLabels", "app.kubernetes.io/name") != svc ||
			str(d, "spec", "template", "metadata", "labels", "app.kubernetes.io/name") != svc {
			t.Errorf("%s: selector and pod labels disagree", svc)
		}
		if get(pod, "securityContext", "runAsNonRoot") != true {
			t.Errorf("%s: runAsNonRoot not set", svc)
		}
		if uid, _ := get(pod, "securityContext", "runAsUser").(int); uid == 0 {
			t.Errorf("%s: runAsUser %v", svc, get(pod, "securityContext", "runAsUser"))
		}
		ctrs := get(pod, "containers").([]any)
		if len(ctrs) != 1 {
			t.Fatalf("%s: %d containers", svc, len(ctrs))
		}
		c := ctrs[0]
		image := str(c, "image")
		wantImage := "toolplane/toolplane"
		if svc == "catalog" {
			wantImage = "toolplane/toolplane-node" // it starts stdio MCP servers
		}
		if image != wantImage || images[image] != "0.1.0" {
			t.Errorf("%s: image %q (tag %q), want %s:0.1.0", svc, image, images[image], wantImage)
		}
		ports := map[string]int{}
		for _, p := range get(c, "ports").([]any) {
			ports[str(p, "name")], _ = get(p, "containerPort").(int)
		}
		if ports["grpc"] != 7420 || ports["http"] != 7421 {
			t.Errorf("%s: container ports %v", svc, ports)
		}
		for probe, path := range map[string]string{"readinessProbe": "/readyz", "livenessProbe": "/healthz"} {
			if str(c, probe, "httpGet", "path") != path || str(c, probe, "httpGet", "port") != "http" {
				t.Errorf("%s: %s is not GET %s on the http port", svc, probe, path)
			}
		}
		for _, kind := range []string{"requests", "limits"} {
			for _, res := range []string{"cpu", "memory"} {
				if get(c, "resources", kind, res) == nil {
					t.Errorf("%s: resources.%s.%s not set", svc, kind, res)
				}
			}
		}
		if reqMem, limMem := memBytes(t, str(c, "resources", "requests", "memory")), memBytes(t, str(c, "resources", "limits", "memory")); reqMem > limMem {
			t.Errorf("%s: memory request above limit", svc)
		}
		if get(c, "securityContext", "readOnlyRootFilesystem") != true || get(c, "securityContext", "allowPrivilegeEscalation") != false {
			t.Errorf("%s: container securityContext not hardened", svc)
		}
		// Volumes: the PVC at /data, the ConfigMap's toolplane.yaml at /etc/toolplane.
		mounts := map[string]string{}
		for _, m := range get(c, "volumeMounts").([]any) {
			mounts[str(m, "name")] = str(m, "mountPath")
		}
		vols := map[string]any{}
		for _, v := range get(pod, "volumes").([]any) {
			vols[str(v, "name")] = v
		}
		if mounts["data"] != "/data" || str(vols["data"], "persistentVolumeClaim", "claimName") != svc+"-data" {
			t.Errorf("%s: /data is not the PVC %s-data", svc, svc)
		}
		pvc := byKind["PersistentVolumeClaim"][svc+"-data"]
		if pvc == nil || str(pvc, "spec", "resources", "requests", "storage") == "" {
			t.Errorf("%s: PVC %s-data missing or without a size", svc, svc)
		}
		if mounts["config"] != "/etc/toolplane" || str(vols["config"], "configMap", "name") != "toolplane-config" {
			t.Errorf("%s: config not mounted from toolplane-config at /etc/toolplane", svc)
		}
		hasConfig := false
		for _, it := range get(vols["config"], "configMap", "items").([]any) {
			if !cmKeys[str(it, "key")] {
				t.Errorf("%s: config item %s is not generated", svc, str(it, "key"))
			}
			if str(it, "path") == "toolplane.yaml" && str(it, "key") == svc+".yaml" {
				hasConfig = true
			}
		}
		if !hasConfig {
			t.Errorf("%s: toolplane.yaml is not %s.yaml", svc, svc)
		}
		// Service: both ports, selecting the pods.
		s := byKind["Service"][svc]
		if s == nil || str(s, "spec", "selector", "app.kubernetes.io/name") != svc {
			t.Fatalf("%s: no Service selecting its pods", svc)
		}
		sp := map[string]int{}
		for _, p := range get(s, "spec", "ports").([]any) {
			sp[str(p, "name")], _ = get(p, "port").(int)
		}
		if sp["grpc"] != 7420 || sp["http"] != 7421 {
			t.Errorf("%s: Service ports %v", svc, sp)
		}
	}
	// The runtime reads its service token from the Secret where its config says.
	rt := byKind["Deployment"]["runtime"]
	c := get(rt, "spec", "template", "spec", "containers", 0)
	var tokenDir string
	for _, m := range get(c, "volumeMounts").([]any) {
		if str(m, "name") == "service-token" {
			tokenDir = str(m, "mountPath")
		}
	}
	var secretName string
	for _, v := range get(rt, "spec", "template", "spec", "volumes").([]any) {
		if str(v, "name") == "service-token" {
			secretName = str(v, "secret", "secretName")
		}
	}
	rc := loadConfig(t, "k8s/config/runtime.yaml")
	if tf := rc.Runtime.Upstream("catalog").TokenFile; filepath.Dir(tf) != tokenDir || !secretKeys[secretName+"/"+filepath.Base(tf)] {
		t.Errorf("runtime token_file %s is not the Secret %s mounted at %s", tf, secretName, tokenDir)
	}
}

// memBytes parses a Kubernetes memory quantity with a binary suffix.
func memBytes(t *testing.T, q string) int64 {
	t.Helper()
	mult := map[string]int64{"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30}
	for suf, m := range mult {
		if n, ok := strings.CutSuffix(q, suf); ok {
			v, err := strconv.ParseInt(n, 10, 64)
			if err != nil {
				t.Fatalf("quantity %q: %v", q, err)
			}
			return v * m
		}
	}
	t.Fatalf("quantity %q without Ki/Mi/Gi", q)
	return 0
}

// The split topology ships copies of the example's servers and policy (a
// kustomization may not read files outside its folder): they must not drift.
func TestExampleCopies(t *testing.T) {
	for _, f := range []string{"extensions_config.json", "policy.csv"} {
		want, err := os.ReadFile(filepath.Join("../../examples", f))
		if err != nil {
			t.Fatal(err)
		}
		if got := read(t, "k8s/config/"+f); !bytes.Equal(got, want) {
			t.Errorf("deploy/k8s/config/%s differs from examples/%s: copy it again", f, f)
		}
	}
}
