package deploy_test

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"
)

// TestKustomizePostgres renders the PostgreSQL overlay (deploy/k8s-postgres)
// with kubectl's kustomize and checks what makes it a multi-replica
// deployment: replicas >= 2 rolled one pod at a time, a PodDisruptionBudget
// per service, the DSN from a Secret (never in the ConfigMap), no RWO data
// volumes, the runtime's workspaces on one ReadWriteMany claim, headless
// Services for the runtime's upstreams and dns:/// upstream addresses in the
// runtime's config (which loads), readiness still /readyz. Skipped without
// kubectl (the rendering is kustomize's own, not re-implemented here).
func TestKustomizePostgres(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not installed")
	}
	out, err := exec.Command(kubectl, "kustomize", filepath.Join(deployDir, "k8s-postgres")).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl kustomize deploy/k8s-postgres: %v\n%s", err, out)
	}
	byKind := map[string]map[string]obj{}
	dec := yaml.NewDecoder(bytes.NewReader(out))
	for {
		var o obj
		if err := dec.Decode(&o); err != nil {
			break
		}
		kind, name := str(o, "kind"), str(o, "metadata", "name")
		if byKind[kind] == nil {
			byKind[kind] = map[string]obj{}
		}
		byKind[kind][name] = o
	}
	storageSecret := ""
	for name, s := range byKind["Secret"] {
		if strings.HasPrefix(name, "toolplane-storage") {
			storageSecret = name
			if get(s, "data", "dsn") == nil {
				t.Errorf("Secret %s has no dsn key", name)
			}
		}
	}
	if storageSecret == "" {
		t.Fatal("no Secret toolplane-storage")
	}
	for name, cm := range byKind["ConfigMap"] {
		for k, v := range get(cm, "data").(obj) {
			if strings.Contains(v.(string), "postgres://") {
				t.Errorf("ConfigMap %s key %s holds a DSN: it belongs in the Secret", name, k)
			}
		}
	}
	for _, svc := range services {
		d := byKind["Deployment"][svc]
		if d == nil {
			t.Fatalf("no Deployment %s", svc)
		}
		if r, _ := get(d, "spec", "replicas").(int); r < 2 {
			t.Errorf("%s: replicas %v, want >= 2", svc, get(d, "spec", "replicas"))
		}
		if str(d, "spec", "strategy", "type") != "RollingUpdate" || get(d, "spec", "strategy", "rollingUpdate", "maxUnavailable") != 0 {
			t.Errorf("%s: strategy %v, want RollingUpdate with maxUnavailable 0", svc, get(d, "spec", "strategy"))
		}
		c := get(d, "spec", "template", "spec", "containers", 0)
		dsn := false
		for _, e := range get(c, "env").([]any) {
			if str(e, "name") == "TOOLPLANE_STORAGE_DSN" && str(e, "valueFrom", "secretKeyRef", "name") == storageSecret && str(e, "valueFrom", "secretKeyRef", "key") == "dsn" {
				dsn = true
			}
		}
		if !dsn {
			t.Errorf("%s: TOOLPLANE_STORAGE_DSN is not from Secret %s key dsn", svc, storageSecret)
		}
		if svc == "catalog" {
			// Stateful servers are placed by the pod's address, as the
			// runtime's dns:/// upstream resolves it (decision 0086).
			podIP, advertise := false, ""
			for _, e := range get(c, "env").([]any) {
				podIP = podIP || (str(e, "name") == "POD_IP" && str(e, "valueFrom", "fieldRef", "fieldPath") == "status.podIP")
				if str(e, "name") == "TOOLPLANE_CATALOG_PLACEMENT_ADVERTISE_ADDRESS" {
					advertise = str(e, "value")
				}
			}
			if !podIP || advertise != "$(POD_IP):7420" {
				t.Errorf("catalog: POD_IP %v, advertise address %q; want status.podIP and $(POD_IP):7420", podIP, advertise)
			}
		}
		if str(c, "readinessProbe", "httpGet", "path") != "/readyz" {
			t.Errorf("%s: readiness is not /readyz (which pings the store)", svc)
		}
		var data any
		for _, v := range get(d, "spec", "template", "spec", "volumes").([]any) {
			if str(v, "name") == "data" {
				data = v
			}
		}
		if svc == "runtime" {
			if str(data, "persistentVolumeClaim", "claimName") != "runtime-workspace" {
				t.Errorf("runtime: /data is %v, want the claim runtime-workspace", data)
			}
		} else if get(data, "emptyDir") == nil || get(data, "persistentVolumeClaim") != nil {
			t.Errorf("%s: /data is %v, want an emptyDir (the state is in the database)", svc, data)
		}
		if byKind["PersistentVolumeClaim"][svc+"-data"] != nil {
			t.Errorf("%s: the RWO claim %s-data is still there", svc, svc)
		}
		pdb := byKind["PodDisruptionBudget"][svc]
		if pdb == nil || str(pdb, "spec", "selector", "matchLabels", "app.kubernetes.io/name") != svc || get(pdb, "spec", "minAvailable") != 1 {
			t.Errorf("%s: no PodDisruptionBudget keeping one pod: %v", svc, pdb)
		}
		s := byKind["Service"][svc]
		headless := str(s, "spec", "clusterIP") == "None"
		if svc != "runtime" && !headless {
			t.Errorf("%s: Service not headless (the runtime balances over the pods itself)", svc)
		}
	}
	ws := byKind["PersistentVolumeClaim"]["runtime-workspace"]
	if ws == nil || str(ws, "spec", "accessModes", 0) != "ReadWriteMany" {
		t.Errorf("runtime-workspace: %v, want a ReadWriteMany claim", ws)
	}
	// The runtime's config: dns:/// upstreams, the rest as in ../k8s.
	rc := loadConfig(t, "k8s-postgres/config/runtime.yaml")
	for _, up := range []string{"catalog", "authz", "skills"} {
		if a := rc.Runtime.Upstream(up).Address; a != "dns:///"+up+":7420" {
			t.Errorf("runtime.upstreams.%s.address = %q, want dns:///%s:7420", up, a, up)
		}
	}
	strip := func(b []byte) string {
		var keep []string
		for _, l := range strings.Split(string(b), "\n") {
			if !strings.HasPrefix(strings.TrimSpace(l), "#") {
				keep = append(keep, strings.ReplaceAll(l, "dns:///", ""))
			}
		}
		return strings.Join(keep, "\n")
	}
	if strip(read(t, "k8s-postgres/config/runtime.yaml")) != strip(read(t, "k8s/config/runtime.yaml")) {
		t.Error("deploy/k8s-postgres/config/runtime.yaml differs from deploy/k8s/config/runtime.yaml beyond the dns:/// upstreams: copy it again")
	}
}

// TestComposePostgres: the compose variant on PostgreSQL — the toolplane
// services pass the same checks as the split file's, every one gets the DSN
// and waits for the database's health check, catalog, authz and skills run
// two replicas, two runtimes share one workspace volume and use the
// dns:/// runtime config.
func TestComposePostgres(t *testing.T) {
	c := parseCompose(t, "compose.postgres.yaml")
	var raw struct {
		Services map[string]struct {
			Image       string            `yaml:"image"`
			Environment map[string]string `yaml:"environment"`
			Deploy      struct {
				Replicas int `yaml:"replicas"`
			} `yaml:"deploy"`
			DependsOn map[string]any `yaml:"depends_on"`
			Volumes   []string       `yaml:"volumes"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(read(t, "compose.postgres.yaml"), &raw); err != nil {
		t.Fatal(err)
	}
	pg, ok := raw.Services["postgres"]
	if !ok || !strings.HasPrefix(pg.Image, "postgres:") {
		t.Fatalf("no postgres service: %+v", pg)
	}
	delete(c.Services, "postgres")
	checkCompose(t, "compose.postgres.yaml", c, dockerStages(t))
	for name, s := range raw.Services {
		if name == "postgres" {
			continue
		}
		dsn := s.Environment["TOOLPLANE_STORAGE_DSN"]
		if !strings.HasPrefix(dsn, "postgres://") || !strings.Contains(dsn, "@postgres:5432/") {
			t.Errorf("%s: TOOLPLANE_STORAGE_DSN %q does not name the postgres service", name, dsn)
		}
		switch name {
		case "catalog", "authz", "skills":
			if s.Deploy.Replicas < 2 {
				t.Errorf("%s: %d replicas, want >= 2", name, s.Deploy.Replicas)
			}
			if _, ok := s.DependsOn["postgres"]; !ok {
				t.Errorf("%s: does not wait for postgres", name)
			}
		case "runtime-a", "runtime-b":
			if !slices.Contains(s.Volumes, "runtime-workspace:/data") || !slices.Contains(s.Volumes, "./k8s-postgres/config/runtime.yaml:/etc/toolplane/toolplane.yaml:ro") {
				t.Errorf("%s: volumes %v, want the shared workspace and the dns:/// config", name, s.Volumes)
			}
		default:
			t.Errorf("unexpected service %s", name)
		}
	}
	if _, ok := raw.Services["runtime-b"]; !ok {
		t.Error("no second runtime")
	}
}
