package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/onceonly/onceonly/internal/platform/testkit"
)

// The walkthrough is what a new user meets first: if a documented answer no
// longer matches the demo, the page is lying. The test reads
// docs/walkthrough.md, runs its steps against a fresh demo on free ports and
// fails naming the step whose status, header or JSON body differs.
//
// The convention the page follows (stated for writers in this comment, for
// readers in the page itself):
//
//   - A step is a ```sh block holding one curl command, followed by a
//     ```http block with what `curl -si` printed: status line, headers, a
//     blank line, the body. The test sends it with net/http; only -s, -i,
//     -si, -X, -H and -d/--data/--data-raw are understood, in shell quoting
//     ('…', "…" with $VAR, '"$VAR"' concatenations).
//   - A ```sh block of only NAME=value lines sets variables. The value is the
//     one the page shows in the previous response; the test binds NAME to the
//     value at the same place in the response it got (ids and tokens differ
//     from run to run). A value not found there (a port) is taken literally.
//   - A ```sh block `sleep N` waits; `<!-- walkthrough:sleep 3s … -->` before
//     it overrides N (the test runs the demo with RECONCILE_GRACE=2s).
//   - `<!-- walkthrough:skip reason -->` before a block: not executed (output
//     in a ```text block). Every other ```sh block must be one of the above.
//   - `<!-- walkthrough:retry 15s -->`: the step is asynchronous; send it
//     again until it matches or the time is up.
//   - `<!-- walkthrough:repeat N -->`: send it up to N times until the status
//     matches (rate limiting), then compare the rest.
//
// Compared: the status; every documented header except Date, Content-Length
// and X-Request-Id (Location and Retry-After: present); the JSON body
// structurally — same keys, same array lengths, same values, except the
// values of walkthroughVariableKeys (ids, tokens, times), which only have to
// be strings (or null where the page shows null).
func TestWalkthrough_DocumentedResponsesMatchTheDemo(t *testing.T) {
	t.Parallel()
	steps := parseWalkthrough(t, "../../docs/walkthrough.md")

	bin := testkit.BuildBinary(t, "./cmd/demo")
	p := testkit.Start(t, bin, []string{
		"DATA_DIR=" + t.TempDir(),
		"ORDER_HTTP_ADDR=127.0.0.1:0",
		"PAYMENT_HTTP_ADDR=127.0.0.1:0",
		"RECONCILE_GRACE=2s",
	})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if _, ok := p.WaitLine(ctx, "Ctrl-C stops it"); !ok {
		t.Fatalf("no ready banner within 15 s:\n%s", p.Output())
	}
	banner := p.Output()
	bannerURL := func(name string) string {
		m := regexp.MustCompile(`(?m)^` + name + `:\s+(http://127\.0\.0\.1:\d+)$`).FindStringSubmatch(banner)
		if m == nil {
			t.Fatalf("banner has no %s URL:\n%s", name, banner)
		}
		return m[1]
	}
	orderURL, paymentURL := bannerURL("order"), bannerURL("payment")
	testkit.WaitReady(t, orderURL, 10*time.Second)
	testkit.WaitReady(t, paymentURL, 10*time.Second)

	r := &walkthroughRun{
		t:       t,
		vars:    map[string]string{},
		rewrite: strings.NewReplacer("http://localhost:8080", orderURL, "http://localhost:8081", paymentURL),
		client:  &http.Client{Timeout: 10 * time.Second},
	}
	var ran, skipped int
	for _, s := range steps {
		switch {
		case s.skip != "":
			skipped++
			t.Logf("skipped %s: %s", s.name(), s.skip)
		case s.assign != nil:
			r.assign(s)
		case s.sleep > 0:
			time.Sleep(s.sleep)
		default:
			ran++
			if !r.request(s) {
				t.FailNow()
			}
		}
	}
	t.Logf("%d requests executed, %d blocks skipped", ran, skipped)
	if ran < 30 {
		t.Errorf("only %d requests executed: did the page or its convention change?", ran)
	}

	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.Wait(10 * time.Second); code != 0 {
		t.Errorf("demo exit code %d after SIGTERM", code)
	}
}

// walkthroughVariableKeys are the JSON keys whose values differ from run to
// run: the page shows the values it got, the test accepts any string.
var walkthroughVariableKeys = map[string]bool{
	"id": true, "token": true, "expires_at": true, "created_at": true, "updated_at": true,
	"payment_id": true, "order_id": true, "gateway_txn_id": true,
	"window_start": true, "window_end": true, "next_cursor": true,
}

// walkthroughIgnoredHeaders differ on every response; walkthroughPresentHeaders
// must be there but carry run-dependent values.
var (
	walkthroughIgnoredHeaders = map[string]bool{"Date": true, "Content-Length": true, "X-Request-Id": true}
	walkthroughPresentHeaders = map[string]bool{"Location": true, "Retry-After": true}
)

type walkthroughStep struct {
	line    int    // line of the ```sh fence in walkthrough.md
	heading string // nearest heading above
	cmd     string // the sh block
	expect  string // the ```http block after it, if any
	skip    string
	retry   time.Duration
	repeat  int
	sleep   time.Duration
	assign  [][2]string
}

func (s walkthroughStep) name() string {
	return fmt.Sprintf("%q (walkthrough.md:%d)", s.heading, s.line)
}

var (
	walkthroughMarker = regexp.MustCompile(`^<!-- walkthrough:(\w+)\s*(.*?)\s*-->$`)
	walkthroughAssign = regexp.MustCompile(`^([A-Z_][A-Z0-9_]*)=(\S*)$`)
	walkthroughSleep  = regexp.MustCompile(`^sleep (\d+)$`)
)

func parseWalkthrough(t *testing.T, path string) []walkthroughStep {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(raw), "\n")
	block := func(i int) (string, int) { // body of the fence opened at line i, index of its closing line
		var b []string
		for j := i + 1; j < len(lines); j++ {
			if lines[j] == "```" {
				return strings.Join(b, "\n"), j
			}
			b = append(b, lines[j])
		}
		t.Fatalf("walkthrough.md:%d: unclosed fence", i+1)
		return "", 0
	}
	var (
		steps   []walkthroughStep
		heading string
		marker  [2]string
	)
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if strings.HasPrefix(l, "#") {
			heading = strings.TrimSpace(strings.TrimLeft(l, "#"))
			continue
		}
		if m := walkthroughMarker.FindStringSubmatch(l); m != nil {
			marker = [2]string{m[1], m[2]}
			continue
		}
		if !strings.HasPrefix(l, "```") {
			continue
		}
		lang := strings.TrimPrefix(l, "```")
		body, end := block(i)
		if lang != "sh" {
			i = end
			continue
		}
		s := walkthroughStep{line: i + 1, heading: heading, cmd: strings.TrimSpace(body)}
		i = end
		// The response block, if the next non-blank line opens one.
		j := i + 1
		for j < len(lines) && strings.TrimSpace(lines[j]) == "" {
			j++
		}
		if j < len(lines) && lines[j] == "```http" {
			s.expect, i = block(j)
		}
		switch marker[0] {
		case "":
		case "skip":
			s.skip = marker[1]
			if s.skip == "" {
				t.Fatalf("%s: walkthrough:skip needs a reason", s.name())
			}
		case "retry", "sleep":
			d, err := time.ParseDuration(strings.Fields(marker[1] + " ")[0])
			if err != nil {
				t.Fatalf("%s: walkthrough:%s %q: %v", s.name(), marker[0], marker[1], err)
			}
			if marker[0] == "retry" {
				s.retry = d
			} else {
				s.sleep = d
			}
		case "repeat":
			n, err := strconv.Atoi(strings.Fields(marker[1] + " ")[0])
			if err != nil || n < 1 {
				t.Fatalf("%s: walkthrough:repeat %q: want a count", s.name(), marker[1])
			}
			s.repeat = n
		default:
			t.Fatalf("%s: unknown marker walkthrough:%s", s.name(), marker[0])
		}
		marker = [2]string{}
		if s.skip == "" {
			classifyWalkthroughStep(t, &s)
		}
		steps = append(steps, s)
	}
	if len(steps) == 0 {
		t.Fatalf("%s: no steps", path)
	}
	return steps
}

func classifyWalkthroughStep(t *testing.T, s *walkthroughStep) {
	t.Helper()
	cmdLines := strings.Split(s.cmd, "\n")
	if m := walkthroughSleep.FindStringSubmatch(s.cmd); m != nil {
		if s.sleep == 0 {
			n, _ := strconv.Atoi(m[1])
			s.sleep = time.Duration(n) * time.Second
		}
		return
	}
	if s.sleep > 0 {
		t.Fatalf("%s: walkthrough:sleep on a block that is not `sleep N`", s.name())
	}
	allAssign := true
	for _, l := range cmdLines {
		m := walkthroughAssign.FindStringSubmatch(l)
		if m == nil {
			allAssign = false
			break
		}
		s.assign = append(s.assign, [2]string{m[1], m[2]})
	}
	if allAssign {
		return
	}
	s.assign = nil
	if len(cmdLines) != 1 || !strings.HasPrefix(s.cmd, "curl ") || s.expect == "" {
		t.Fatalf("%s: a ```sh block must be one curl followed by a ```http block, NAME=value lines, or `sleep N`; otherwise mark it <!-- walkthrough:skip reason -->:\n%s", s.name(), s.cmd)
	}
}

type walkthroughRun struct {
	t       *testing.T
	vars    map[string]string
	rewrite *strings.Replacer
	client  *http.Client
	// The last executed step's documented and received bodies, for NAME=value.
	lastDoc, lastGot any
}

func (r *walkthroughRun) assign(s walkthroughStep) {
	for _, a := range s.assign {
		name, shown := a[0], a[1]
		if got, ok := walkthroughFind(r.lastDoc, r.lastGot, shown); ok {
			r.vars[name] = got
		} else {
			r.vars[name] = shown
		}
	}
}

// walkthroughFind looks for the string shown in the documented body and
// returns what the received body holds at the same place.
func walkthroughFind(doc, got any, shown string) (string, bool) {
	switch d := doc.(type) {
	case string:
		if g, ok := got.(string); ok && d == shown {
			return g, true
		}
	case map[string]any:
		g, _ := got.(map[string]any)
		keys := make([]string, 0, len(d))
		for k := range d {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if v, ok := walkthroughFind(d[k], g[k], shown); ok {
				return v, true
			}
		}
	case []any:
		g, _ := got.([]any)
		for i := range d {
			if i < len(g) {
				if v, ok := walkthroughFind(d[i], g[i], shown); ok {
					return v, true
				}
			}
		}
	}
	return "", false
}

type walkthroughExpect struct {
	status  int
	headers [][2]string
	body    any // nil when the page shows no body
}

func (r *walkthroughRun) request(s walkthroughStep) bool {
	t := r.t
	t.Helper()
	req, err := parseCurl(s.cmd, r.vars)
	if err != nil {
		t.Errorf("%s: %v", s.name(), err)
		return false
	}
	req.url = r.rewrite.Replace(req.url)
	want, err := parseExpectedHTTP(s.expect)
	if err != nil {
		t.Errorf("%s: documented response: %v", s.name(), err)
		return false
	}
	attempts, deadline := 1, time.Time{}
	if s.repeat > 0 {
		attempts = s.repeat
	}
	if s.retry > 0 {
		deadline = time.Now().Add(s.retry)
	}
	for n := 1; ; n++ {
		status, hdr, body, err := r.send(req)
		var problems []string
		if err != nil {
			problems = []string{err.Error()}
		} else {
			problems = compareWalkthrough(want, status, hdr, body)
		}
		if len(problems) == 0 {
			r.lastDoc = want.body
			r.lastGot = nil
			if want.body != nil {
				r.lastGot, _ = decodeWalkthroughJSON(body)
			}
			return true
		}
		statusMismatch := err == nil && status != want.status
		switch {
		case s.repeat > 0 && statusMismatch && n < attempts:
			continue
		case s.retry > 0 && time.Now().Before(deadline):
			time.Sleep(200 * time.Millisecond)
			continue
		}
		t.Errorf("%s no longer matches the demo (attempt %d):\n  %s\n  %s\ngot %d:\n%s",
			s.name(), n, s.cmd, strings.Join(problems, "\n  "), status, body)
		return false
	}
}

type walkthroughRequest struct {
	method, url string
	header      http.Header
	body        *string
}

func (r *walkthroughRun) send(req walkthroughRequest) (int, http.Header, []byte, error) {
	var body io.Reader
	if req.body != nil {
		body = strings.NewReader(*req.body)
	}
	hr, err := http.NewRequest(req.method, req.url, body)
	if err != nil {
		return 0, nil, nil, err
	}
	hr.Header = req.header.Clone()
	resp, err := r.client.Do(hr)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b, err
}

// parseCurl understands the subset of curl the walkthrough uses, with shell
// quoting: single quotes literal, double quotes and bare words expand $VAR
// and ${VAR}; adjacent pieces form one word.
func parseCurl(cmd string, vars map[string]string) (walkthroughRequest, error) {
	words, err := shellWords(cmd, vars)
	if err != nil {
		return walkthroughRequest{}, err
	}
	req := walkthroughRequest{header: http.Header{}}
	for i := 1; i < len(words); i++ {
		w := words[i]
		next := func() (string, error) {
			if i+1 >= len(words) {
				return "", fmt.Errorf("curl %s needs a value", w)
			}
			i++
			return words[i], nil
		}
		switch {
		case w == "-s" || w == "-i" || w == "-si" || w == "-is":
		case w == "-X":
			if req.method, err = next(); err != nil {
				return req, err
			}
		case w == "-H":
			h, err := next()
			if err != nil {
				return req, err
			}
			k, v, ok := strings.Cut(h, ":")
			if !ok {
				return req, fmt.Errorf("header %q has no colon", h)
			}
			req.header.Add(strings.TrimSpace(k), strings.TrimSpace(v))
		case w == "-d" || w == "--data" || w == "--data-raw":
			d, err := next()
			if err != nil {
				return req, err
			}
			req.body = &d
		case strings.HasPrefix(w, "http://"):
			req.url = w
		default:
			return req, fmt.Errorf("curl argument %q is outside the subset the walkthrough test understands", w)
		}
	}
	if req.url == "" {
		return req, fmt.Errorf("curl without a URL")
	}
	if req.body != nil {
		if req.method == "" {
			req.method = http.MethodPost
		}
		if req.header.Get("Content-Type") == "" { // what curl -d sends
			req.header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
	}
	if req.method == "" {
		req.method = http.MethodGet
	}
	return req, nil
}

func shellWords(cmd string, vars map[string]string) ([]string, error) {
	var (
		words  []string
		cur    strings.Builder
		inWord bool
	)
	expand := func(s string, i int) (int, error) { // s[i] == '$'
		j := i + 1
		braced := j < len(s) && s[j] == '{'
		if braced {
			j++
		}
		k := j
		for k < len(s) && (s[k] == '_' || s[k] >= 'A' && s[k] <= 'Z' || s[k] >= 'a' && s[k] <= 'z' || s[k] >= '0' && s[k] <= '9') {
			k++
		}
		name := s[j:k]
		if braced {
			if k >= len(s) || s[k] != '}' {
				return 0, fmt.Errorf("unclosed ${ in %q", s)
			}
			k++
		}
		if name == "" {
			return 0, fmt.Errorf("$ without a variable name in %q", s)
		}
		v, ok := vars[name]
		if !ok {
			return 0, fmt.Errorf("$%s is used before the walkthrough sets it", name)
		}
		cur.WriteString(v)
		return k, nil
	}
	for i := 0; i < len(cmd); {
		c := cmd[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
			i++
		case c == '\'':
			end := strings.IndexByte(cmd[i+1:], '\'')
			if end < 0 {
				return nil, fmt.Errorf("unclosed ' in %q", cmd)
			}
			cur.WriteString(cmd[i+1 : i+1+end])
			inWord, i = true, i+end+2
		case c == '"':
			inWord = true
			i++
			for {
				if i >= len(cmd) {
					return nil, fmt.Errorf("unclosed \" in %q", cmd)
				}
				if cmd[i] == '"' {
					i++
					break
				}
				switch {
				case cmd[i] == '\\' && i+1 < len(cmd) && strings.ContainsRune(`"\$`+"`", rune(cmd[i+1])):
					cur.WriteByte(cmd[i+1])
					i += 2
				case cmd[i] == '$':
					var err error
					if i, err = expand(cmd, i); err != nil {
						return nil, err
					}
				default:
					cur.WriteByte(cmd[i])
					i++
				}
			}
		case c == '$':
			inWord = true
			var err error
			if i, err = expand(cmd, i); err != nil {
				return nil, err
			}
		case c == '\\' && i+1 < len(cmd):
			cur.WriteByte(cmd[i+1])
			inWord, i = true, i+2
		case strings.IndexByte("|&;<>()`*?", c) >= 0:
			return nil, fmt.Errorf("shell syntax %q is outside the subset the walkthrough test understands", c)
		default:
			cur.WriteByte(c)
			inWord, i = true, i+1
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	if len(words) == 0 || words[0] != "curl" {
		return nil, fmt.Errorf("not a curl command: %q", cmd)
	}
	return words, nil
}

func parseExpectedHTTP(block string) (walkthroughExpect, error) {
	var e walkthroughExpect
	head, body, _ := strings.Cut(block, "\n\n")
	lines := strings.Split(head, "\n")
	f := strings.Fields(lines[0])
	if len(f) < 2 || !strings.HasPrefix(f[0], "HTTP/") {
		return e, fmt.Errorf("first line %q is not a status line", lines[0])
	}
	var err error
	if e.status, err = strconv.Atoi(f[1]); err != nil {
		return e, fmt.Errorf("status line %q: %v", lines[0], err)
	}
	for _, l := range lines[1:] {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			return e, fmt.Errorf("header line %q has no colon", l)
		}
		e.headers = append(e.headers, [2]string{http.CanonicalHeaderKey(strings.TrimSpace(k)), strings.TrimSpace(v)})
	}
	if body = strings.TrimSpace(body); body != "" {
		if e.body, err = decodeWalkthroughJSON([]byte(body)); err != nil {
			return e, fmt.Errorf("body is not JSON: %v", err)
		}
	}
	return e, nil
}

func decodeWalkthroughJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

func compareWalkthrough(want walkthroughExpect, status int, hdr http.Header, body []byte) []string {
	var problems []string
	if status != want.status {
		problems = append(problems, fmt.Sprintf("status: documented %d, got %d", want.status, status))
	}
	for _, h := range want.headers {
		k, v := h[0], h[1]
		switch {
		case walkthroughIgnoredHeaders[k]:
		case walkthroughPresentHeaders[k]:
			if hdr.Get(k) == "" {
				problems = append(problems, fmt.Sprintf("header %s: documented, missing", k))
			}
		case hdr.Get(k) != v:
			problems = append(problems, fmt.Sprintf("header %s: documented %q, got %q", k, v, hdr.Get(k)))
		}
	}
	if want.body == nil {
		return problems
	}
	got, err := decodeWalkthroughJSON(body)
	if err != nil {
		return append(problems, fmt.Sprintf("body is not JSON: %v", err))
	}
	return append(problems, compareWalkthroughJSON("$", "", want.body, got)...)
}

func compareWalkthroughJSON(path, key string, doc, got any) []string {
	if walkthroughVariableKeys[key] {
		_, docStr := doc.(string)
		_, gotStr := got.(string)
		if (doc == nil) != (got == nil) || docStr != gotStr {
			return []string{fmt.Sprintf("%s: documented %v, got %v", path, doc, got)}
		}
		return nil
	}
	switch d := doc.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: documented an object, got %v", path, got)}
		}
		var problems []string
		keys := make([]string, 0, len(d)+len(g))
		for k := range d {
			keys = append(keys, k)
		}
		for k := range g {
			if _, ok := d[k]; !ok {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			dv, dok := d[k]
			gv, gok := g[k]
			switch {
			case !gok:
				problems = append(problems, fmt.Sprintf("%s.%s: documented, missing", path, k))
			case !dok:
				problems = append(problems, fmt.Sprintf("%s.%s: not documented, got %v", path, k, gv))
			default:
				problems = append(problems, compareWalkthroughJSON(path+"."+k, k, dv, gv)...)
			}
		}
		return problems
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(d) {
			return []string{fmt.Sprintf("%s: documented %d elements, got %v", path, len(d), got)}
		}
		var problems []string
		for i := range d {
			problems = append(problems, compareWalkthroughJSON(fmt.Sprintf("%s[%d]", path, i), "", d[i], g[i])...)
		}
		return problems
	case string:
		if d == "<ANY>" {
			return nil
		}
	}
	if !reflect.DeepEqual(doc, got) {
		return []string{fmt.Sprintf("%s: documented %v, got %v", path, doc, got)}
	}
	return nil
}
