package compose_test

// Validates compose.yaml with compose-go v2, the loader `docker compose` v2
// uses (Debian's docker-compose 1.29 rejects newer keys and cannot judge the
// file), and checks it against DESIGN.md and the code: services, healthchecks,
// start order, ports, the configuration contract, Kafka, the Dockerfile, the
// Prometheus targets and the Grafana dashboard's metric names. Offline, fast.

import (
	"context"
	"encoding/json"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
)

// designEnv is DESIGN.md's "Configuration" table: the only names the
// services may be given (the names are part of the contract).
var designEnv = []string{
	"ORDER_HTTP_ADDR", "PAYMENT_HTTP_ADDR",
	"MYSQL_DSN", "ORDER_MYSQL_DSN", "PAYMENT_MYSQL_DSN",
	"REDIS_ADDR", "KAFKA_BROKERS",
	"PAYMENT_SERVICE_URL", "ORDER_SERVICE_URL",
	"PAYMENT_GATEWAY_SECRET", "INTERNAL_API_TOKEN",
	"ORDER_TOKEN_TTL", "ORDER_SUBMIT_LEASE",
	"ORDER_PAYMENT_TIMEOUT", "ORDER_TIMEOUT_INTERVAL",
	"PAYMENT_GATEWAY",
	"RECONCILE_INTERVAL", "RECONCILE_WINDOW", "RECONCILE_GRACE", "RECONCILE_TIMEOUT",
	"RATE_LIMIT_USER_RPS", "RATE_LIMIT_USER_BURST", "RATE_LIMIT_INSTANCE_RPS", "RATE_LIMIT_INSTANCES",
	"LOCK_EXPIRY", "LOCK_REDIS_ADDRS",
	"OUTBOX_POLL_INTERVAL", "OUTBOX_RETENTION",
	"DATA_DIR",
}

// app describes one service binary and the instances compose runs of it.
type app struct {
	name      string
	config    string // the file whose LoadConfig reads the environment
	port      uint32 // the port inside the container
	instances map[string]string
	required  []string // what the binary refuses to start without
}

var apps = []app{
	{
		name: "order", config: "internal/order/app/config.go", port: 8080,
		instances: map[string]string{"order-1": "8080", "order-2": "8082"},
		required:  []string{"MYSQL_DSN", "REDIS_ADDR", "KAFKA_BROKERS", "PAYMENT_SERVICE_URL", "INTERNAL_API_TOKEN"},
	},
	{
		name: "payment", config: "internal/payment/app/config.go", port: 8081,
		instances: map[string]string{"payment-1": "8081", "payment-2": "8083"},
		required: []string{"MYSQL_DSN", "REDIS_ADDR", "KAFKA_BROKERS", "ORDER_SERVICE_URL",
			"PAYMENT_GATEWAY_SECRET", "INTERNAL_API_TOKEN"},
	},
}

var (
	brokers   = []string{"kafka-1", "kafka-2", "kafka-3"}
	oneShot   = []string{"kafka-init"}
	wantAll   = []string{"mysql", "redis", "kafka-1", "kafka-2", "kafka-3", "kafka-init", "order-1", "order-2", "payment-1", "payment-2", "prometheus", "grafana"}
	appDeps   = map[string]string{"mysql": types.ServiceConditionHealthy, "redis": types.ServiceConditionHealthy, "kafka-init": types.ServiceConditionCompletedSuccessfully}
	wantDepsF = map[string]map[string]string{
		"kafka-init": {"kafka-1": types.ServiceConditionHealthy, "kafka-2": types.ServiceConditionHealthy, "kafka-3": types.ServiceConditionHealthy},
		"order-1":    appDeps, "order-2": appDeps, "payment-1": appDeps, "payment-2": appDeps,
		"prometheus": {"order-1": types.ServiceConditionHealthy, "order-2": types.ServiceConditionHealthy, "payment-1": types.ServiceConditionHealthy, "payment-2": types.ServiceConditionHealthy},
		"grafana":    {"prometheus": types.ServiceConditionHealthy},
	}
)

func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test directory")
		}
		dir = parent
	}
}

func load(t *testing.T) *types.Project {
	t.Helper()
	// No OS environment: the ${VAR:-default} values are what a fresh
	// `docker compose up` gets.
	opts, err := cli.NewProjectOptions([]string{"compose.yaml"},
		cli.WithWorkingDirectory("."), cli.WithEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	p, err := cli.ProjectFromOptions(context.Background(), opts)
	if err != nil {
		t.Fatalf("compose.yaml does not load: %v", err)
	}
	return p
}

func env(s types.ServiceConfig, name string) (string, bool) {
	v, ok := s.Environment[name]
	if !ok || v == nil {
		return "", false
	}
	return *v, true
}

func TestServices(t *testing.T) {
	p := load(t)
	got := p.ServiceNames()
	sort.Strings(got)
	want := slices.Clone(wantAll)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Fatalf("services = %v, want %v", got, want)
	}
}

func TestHealthchecks(t *testing.T) {
	p := load(t)
	for name, s := range p.Services {
		if slices.Contains(oneShot, name) {
			if s.Restart != "" && s.Restart != types.RestartPolicyNo {
				t.Errorf("%s: one-shot service must not restart, has %q", name, s.Restart)
			}
			continue
		}
		hc := s.HealthCheck
		if hc == nil || hc.Disable || len(hc.Test) == 0 || hc.Test[0] == "NONE" {
			t.Errorf("%s: no healthcheck", name)
		}
	}
	// The services' healthchecks hit /readyz on their own port.
	for _, a := range apps {
		for inst := range a.instances {
			test := strings.Join(p.Services[inst].HealthCheck.Test, " ")
			want := "127.0.0.1:" + strconv.Itoa(int(a.port)) + "/readyz"
			if !strings.Contains(test, want) {
				t.Errorf("%s: healthcheck %q does not probe %s", inst, test, want)
			}
		}
	}
	checks := map[string]string{"mysql": "mysqladmin ping", "redis": "redis-cli ping"}
	for svc, want := range checks {
		if test := strings.Join(p.Services[svc].HealthCheck.Test, " "); !strings.Contains(test, want) {
			t.Errorf("%s: healthcheck %q, want %q", svc, test, want)
		}
	}
}

func TestDependsOn(t *testing.T) {
	p := load(t)
	for name, want := range wantDepsF {
		s := p.Services[name]
		got := map[string]string{}
		for dep, d := range s.DependsOn {
			got[dep] = d.Condition
		}
		for dep, cond := range want {
			if got[dep] != cond {
				t.Errorf("%s depends_on %s: condition %q, want %q", name, dep, got[dep], cond)
			}
		}
	}
	// Every condition fits its target: healthy for long-running services,
	// completed_successfully for one-shots; never a bare "started".
	for name, s := range p.Services {
		for dep, d := range s.DependsOn {
			want := types.ServiceConditionHealthy
			if slices.Contains(oneShot, dep) {
				want = types.ServiceConditionCompletedSuccessfully
			}
			if d.Condition != want {
				t.Errorf("%s depends_on %s: condition %q, want %q", name, dep, d.Condition, want)
			}
		}
	}
}

func TestPorts(t *testing.T) {
	p := load(t)
	for _, a := range apps {
		for inst, host := range a.instances {
			s := p.Services[inst]
			found := false
			for _, pc := range s.Ports {
				if pc.Published == host && pc.Target == a.port {
					found = true
				}
			}
			if !found {
				t.Errorf("%s: want host port %s published to %d, have %+v", inst, host, a.port, s.Ports)
			}
		}
	}
}

// requiredIn returns the names config.go reads with Required/RequiredList,
// and every name it reads at all.
func requiredIn(t *testing.T, path string) (required, all []string) {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`e\.(\w+)\("([A-Z0-9_]+)"`).FindAllStringSubmatch(string(src), -1) {
		all = append(all, m[2])
		if strings.HasPrefix(m[1], "Required") {
			required = append(required, m[2])
		}
	}
	if len(required) == 0 {
		t.Fatalf("%s: found no required variables; has LoadConfig changed shape?", path)
	}
	return required, all
}

func TestServiceEnvironment(t *testing.T) {
	p := load(t)
	root := repoRoot(t)
	aliases := map[string][]string{} // app name → aliases every instance carries
	for _, a := range apps {
		required, reads := requiredIn(t, filepath.Join(root, a.config))
		for _, r := range required {
			if !slices.Contains(a.required, r) {
				t.Errorf("%s: %s is required by %s but not by this test's list", a.name, r, a.config)
			}
		}
		var first map[string]string
		for inst := range a.instances {
			s := p.Services[inst]
			vals := map[string]string{}
			for name := range s.Environment {
				v, _ := env(s, name)
				vals[name] = v
				if !slices.Contains(designEnv, name) {
					t.Errorf("%s: %s is not a name from DESIGN.md's configuration table", inst, name)
				} else if !slices.Contains(reads, name) {
					t.Errorf("%s: %s is not read by %s", inst, name, a.config)
				}
			}
			for _, r := range a.required {
				if vals[r] == "" {
					t.Errorf("%s: required %s is not set", inst, r)
				}
			}
			if first == nil {
				first = vals
			} else if !mapsEqual(first, vals) {
				t.Errorf("%s: environment differs from the other %s instance", inst, a.name)
			}
			var al []string
			for _, n := range s.Networks {
				if n != nil {
					al = append(al, n.Aliases...)
				}
			}
			if aliases[a.name] == nil {
				aliases[a.name] = al
			} else {
				aliases[a.name] = intersect(aliases[a.name], al)
			}
		}
	}

	order, payment := p.Services["order-1"], p.Services["payment-1"]
	if v, _ := env(order, "RATE_LIMIT_INSTANCES"); v != strconv.Itoa(len(apps[0].instances)) {
		t.Errorf("order: RATE_LIMIT_INSTANCES = %q, want %d (one per order instance)", v, len(apps[0].instances))
	}
	if v, _ := env(payment, "PAYMENT_GATEWAY"); v != "simulator" {
		t.Errorf("payment: PAYMENT_GATEWAY = %q, want simulator", v)
	}
	ot, _ := env(order, "INTERNAL_API_TOKEN")
	pt, _ := env(payment, "INTERNAL_API_TOKEN")
	if ot != pt {
		t.Errorf("INTERNAL_API_TOKEN differs between order (%q) and payment (%q)", ot, pt)
	}

	// Each service its own database, on the mysql service.
	dbRe := regexp.MustCompile(`@tcp\(([^)]+)\)/([^?]+)`)
	dbs := map[string]bool{}
	for _, s := range []types.ServiceConfig{order, payment} {
		dsn, _ := env(s, "MYSQL_DSN")
		m := dbRe.FindStringSubmatch(dsn)
		if m == nil {
			t.Errorf("%s: MYSQL_DSN %q is not user:pass@tcp(host:port)/db", s.Name, dsn)
			continue
		}
		checkHostPort(t, p, s.Name+" MYSQL_DSN", m[1], "mysql", "3306")
		dbs[m[2]] = true
	}
	if len(dbs) != 2 {
		t.Errorf("order and payment share a database: %v", dbs)
	}
	initSQL, err := os.ReadFile("mysql/init.sql")
	if err != nil {
		t.Fatal(err)
	}
	for db := range dbs {
		if !strings.Contains(string(initSQL), "CREATE DATABASE IF NOT EXISTS "+db) {
			t.Errorf("mysql/init.sql does not create database %s", db)
		}
	}
	mounted := false
	for _, v := range p.Services["mysql"].Volumes {
		if strings.HasSuffix(v.Source, filepath.Join("deploy", "compose", "mysql", "init.sql")) &&
			strings.HasPrefix(v.Target, "/docker-entrypoint-initdb.d/") {
			mounted = true
		}
	}
	if !mounted {
		t.Error("mysql: init.sql is not mounted into /docker-entrypoint-initdb.d")
	}

	for _, s := range []types.ServiceConfig{order, payment} {
		addr, _ := env(s, "REDIS_ADDR")
		checkHostPort(t, p, s.Name+" REDIS_ADDR", addr, "redis", "6379")

		list, _ := env(s, "KAFKA_BROKERS")
		var hosts []string
		for _, b := range strings.Split(list, ",") {
			host, port, err := net.SplitHostPort(strings.TrimSpace(b))
			if err != nil || port != "9092" {
				t.Errorf("%s: KAFKA_BROKERS entry %q is not host:9092", s.Name, b)
				continue
			}
			hosts = append(hosts, host)
		}
		sort.Strings(hosts)
		if !slices.Equal(hosts, brokers) {
			t.Errorf("%s: KAFKA_BROKERS = %q, want the three brokers %v", s.Name, list, brokers)
		}
	}

	// Service-to-service URLs reach every instance of the other service:
	// a network alias that all its instances carry.
	urls := []struct {
		from types.ServiceConfig
		name string
		to   app
	}{{order, "PAYMENT_SERVICE_URL", apps[1]}, {payment, "ORDER_SERVICE_URL", apps[0]}}
	for _, c := range urls {
		raw, _ := env(c.from, c.name)
		u, err := url.Parse(raw)
		if err != nil || u.Scheme != "http" {
			t.Errorf("%s: %s = %q is not an http URL", c.from.Name, c.name, raw)
			continue
		}
		if !slices.Contains(aliases[c.to.name], u.Hostname()) {
			t.Errorf("%s: %s host %q is not an alias of every %s instance (%v)", c.from.Name, c.name, u.Hostname(), c.to.name, aliases[c.to.name])
		}
		if u.Port() != strconv.Itoa(int(c.to.port)) {
			t.Errorf("%s: %s port %q, want %d", c.from.Name, c.name, u.Port(), c.to.port)
		}
	}
}

func checkHostPort(t *testing.T, p *types.Project, what, hostport, wantHost, wantPort string) {
	t.Helper()
	host, port, err := net.SplitHostPort(hostport)
	if err != nil || host != wantHost || port != wantPort {
		t.Errorf("%s: %q, want %s:%s", what, hostport, wantHost, wantPort)
		return
	}
	if _, ok := p.Services[host]; !ok {
		t.Errorf("%s: host %q is not a service", what, host)
	}
}

func TestInfrastructure(t *testing.T) {
	p := load(t)
	if img := p.Services["mysql"].Image; !strings.HasPrefix(img, "mysql:8.4") {
		t.Errorf("mysql image %q, want mysql:8.4", img)
	}
	redis := p.Services["redis"]
	if !strings.HasPrefix(redis.Image, "redis:7") {
		t.Errorf("redis image %q, want redis:7", redis.Image)
	}
	if cmd := strings.Join(redis.Command, " "); !strings.Contains(cmd, "--maxmemory-policy noeviction") {
		t.Errorf("redis command %q lacks --maxmemory-policy noeviction (tokens and locks must not be evicted)", cmd)
	}

	ids, clusters := map[string]bool{}, map[string]bool{}
	for _, b := range brokers {
		s := p.Services[b]
		want := map[string]string{
			"KAFKA_PROCESS_ROLES":              "broker,controller",
			"KAFKA_DEFAULT_REPLICATION_FACTOR": "3",
			"KAFKA_MIN_INSYNC_REPLICAS":        "2",
			"KAFKA_AUTO_CREATE_TOPICS_ENABLE":  "false",
			"KAFKA_CONTROLLER_QUORUM_VOTERS":   "1@kafka-1:9093,2@kafka-2:9093,3@kafka-3:9093",
		}
		for k, v := range want {
			if got, _ := env(s, k); got != v {
				t.Errorf("%s: %s = %q, want %q", b, k, got, v)
			}
		}
		id, _ := env(s, "KAFKA_NODE_ID")
		ids[id] = true
		c, _ := env(s, "CLUSTER_ID")
		clusters[c] = true
		if adv, _ := env(s, "KAFKA_ADVERTISED_LISTENERS"); !strings.Contains(adv, "PLAINTEXT://"+b+":9092") {
			t.Errorf("%s: advertised listeners %q do not name PLAINTEXT://%s:9092", b, adv, b)
		}
	}
	if len(ids) != 3 || len(clusters) != 1 {
		t.Errorf("brokers: node ids %v (want 3 distinct), cluster ids %v (want 1)", ids, clusters)
	}

	script := strings.Join(append(slices.Clone(p.Services["kafka-init"].Entrypoint), p.Services["kafka-init"].Command...), " ")
	script = strings.Join(strings.Fields(strings.ReplaceAll(script, "\\\n", " ")), " ")
	for _, want := range []string{
		"--topic payment.events --partitions 6 --replication-factor 3",
		"--topic payment.events.dlq --partitions 1 --replication-factor 3",
	} {
		if !strings.Contains(script, want) {
			t.Errorf("kafka-init does not run %q:\n%s", want, script)
		}
	}
}

func TestBuildAndDockerfile(t *testing.T) {
	p := load(t)
	root := repoRoot(t)
	for _, a := range apps {
		for inst := range a.instances {
			b := p.Services[inst].Build
			if b == nil {
				t.Errorf("%s: not built from the repository", inst)
				continue
			}
			if filepath.Clean(b.Context) != root || b.Dockerfile != "Dockerfile" || b.Target != a.name {
				t.Errorf("%s: build %s/%s target %q, want %s/Dockerfile target %q", inst, b.Context, b.Dockerfile, b.Target, root, a.name)
			}
		}
	}

	src, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	df := string(src)
	for _, want := range []string{
		"FROM golang:1.26 AS build",
		"CGO_ENABLED=0 go build",
		"./cmd/order", "./cmd/payment",
		"FROM runtime AS order", "FROM runtime AS payment",
		"EXPOSE 8080", "EXPOSE 8081",
		"--mount=type=cache,target=/go/pkg/mod",
	} {
		if !strings.Contains(df, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	// Non-root, and no secrets baked in.
	user := regexp.MustCompile(`(?m)^USER\s+(\S+)`).FindStringSubmatch(df)
	if user == nil || strings.HasPrefix(user[1], "root") || strings.HasPrefix(user[1], "0") {
		t.Errorf("Dockerfile: final stages must run as a non-root USER, have %v", user)
	}
	if m := regexp.MustCompile(`(?mi)^(ENV|ARG)\s+.*(SECRET|TOKEN|PASSWORD|_DSN)`).FindString(df); m != "" {
		t.Errorf("Dockerfile bakes in a secret: %q", m)
	}
	// The healthchecks use wget: the runtime image must have it (busybox).
	if !regexp.MustCompile(`(?m)^FROM alpine:\S+ AS runtime`).MatchString(df) {
		t.Error("Dockerfile: the runtime stage is not Alpine, but the compose healthchecks need its busybox wget")
	}
}

func TestPrometheus(t *testing.T) {
	p := load(t)
	src, err := os.ReadFile("prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range apps {
		for inst := range a.instances {
			target := `"` + inst + ":" + strconv.Itoa(int(a.port)) + `"`
			if !strings.Contains(string(src), target) {
				t.Errorf("prometheus.yml does not scrape %s", target)
			}
		}
	}
	mounted := false
	for _, v := range p.Services["prometheus"].Volumes {
		if strings.HasSuffix(v.Source, filepath.Join("deploy", "compose", "prometheus.yml")) && v.Target == "/etc/prometheus/prometheus.yml" {
			mounted = true
		}
	}
	if !mounted {
		t.Error("prometheus: prometheus.yml is not mounted at /etc/prometheus/prometheus.yml")
	}
}

// metricRe finds a metric name in PromQL; histogram series suffixes are
// stripped before the lookup.
var metricRe = regexp.MustCompile(`onceonly_[a-z0-9_]+`)

func TestGrafanaDashboard(t *testing.T) {
	src, err := os.ReadFile("grafana/dashboards/onceonly.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		UID    string `json:"uid"`
		Panels []struct {
			Type    string `json:"type"`
			Title   string `json:"title"`
			Targets []struct {
				Expr       string `json:"expr"`
				Datasource struct {
					UID string `json:"uid"`
				} `json:"datasource"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(src, &dash); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	ds, err := os.ReadFile("grafana/provisioning/datasources/prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	known := sourceMetrics(t, repoRoot(t))
	used := map[string]bool{}
	for _, panel := range dash.Panels {
		if panel.Type == "row" {
			continue
		}
		if len(panel.Targets) == 0 {
			t.Errorf("panel %q has no query", panel.Title)
		}
		for _, tg := range panel.Targets {
			if !strings.Contains(string(ds), "uid: "+tg.Datasource.UID) {
				t.Errorf("panel %q: datasource uid %q is not provisioned", panel.Title, tg.Datasource.UID)
			}
			for _, m := range metricRe.FindAllString(tg.Expr, -1) {
				used[m] = true
				base := m
				for _, suf := range []string{"_bucket", "_sum", "_count"} {
					if b, ok := strings.CutSuffix(m, suf); ok && known(b) {
						base = b
					}
				}
				if !known(base) {
					t.Errorf("panel %q uses %s, which no Go source defines", panel.Title, m)
				}
			}
		}
	}
	// The techniques the dashboard is for.
	for _, m := range []string{
		"onceonly_idempotency_claims_total", "onceonly_order_events_consumed_total",
		"onceonly_outbox_backlog", "onceonly_lock_fenced_writes_total",
		"onceonly_ratelimit_limited_total", "onceonly_ratelimit_fallback_active",
		"onceonly_payment_callbacks_total", "onceonly_reconcile_runs_total",
		"onceonly_http_requests_total",
	} {
		if !used[m] {
			t.Errorf("dashboard has no panel for %s", m)
		}
	}
}

// sourceMetrics returns the onceonly_* metric names the Go sources define:
// full literals ("onceonly_x_y"), Namespace+"_x_y", or a Namespace/Subsystem/Name
// triple whose subsystem and name are string literals of the same file.
// Names only mentioned in comments do not count.
func sourceMetrics(t *testing.T, root string) func(string) bool {
	t.Helper()
	lit := regexp.MustCompile(`"([a-z0-9_]+)"`)
	full := map[string]bool{}
	var files [][]string // string literals of each file that sets a Subsystem
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == ".git" || n == "data" || n == "node_modules" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var ls []string
		for _, m := range lit.FindAllStringSubmatch(string(src), -1) {
			switch {
			case strings.HasPrefix(m[1], "onceonly_"):
				full[m[1]] = true
			case strings.HasPrefix(m[1], "_") && strings.Contains(string(src), "Namespace+"):
				full["onceonly"+m[1]] = true // pm.Namespace+"_outbox_backlog"
			}
			ls = append(ls, m[1])
		}
		if strings.Contains(string(src), "Subsystem") {
			files = append(files, ls)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return func(m string) bool {
		if full[m] {
			return true
		}
		rest, ok := strings.CutPrefix(m, "onceonly_")
		if !ok {
			return false
		}
		for _, ls := range files {
			for _, s := range ls {
				if n, ok := strings.CutPrefix(rest, s+"_"); ok && slices.Contains(ls, n) {
					return true
				}
			}
		}
		return false
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func intersect(a, b []string) []string {
	var out []string
	for _, x := range a {
		if slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}
