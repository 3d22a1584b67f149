package runtime

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	gwruntime "github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/durationpb"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	skillsv1 "github.com/toolplane/toolplane/gen/go/toolplane/skills/v1"
	"github.com/toolplane/toolplane/internal/auth"
	"github.com/toolplane/toolplane/internal/grpcx"
	"github.com/toolplane/toolplane/services/runtime/runtimeident"
	"github.com/toolplane/toolplane/services/runtime/runtimetools"
)

// UploadsConfig bounds uploads (docs/decisions/0150-where-acp-and-workspace-servers-run.md).
type UploadsConfig struct {
	// MaxFileBytes is the largest uploaded file. Default 33554432 (32 MiB).
	MaxFileBytes int64 `yaml:"max_file_bytes"`
	// MaxThreadBytes bounds all of a thread's uploads together. Default
	// 268435456 (256 MiB).
	MaxThreadBytes int64 `yaml:"max_thread_bytes"`
	// MaxInFlightPerPrincipal caps the uploads one principal has in
	// progress at once; more are refused with RESOURCE_EXHAUSTED (429 on
	// REST). Default 2.
	MaxInFlightPerPrincipal int `yaml:"max_in_flight_per_principal"`
	// StallTimeout cuts an upload that receives no bytes for this long
	// (its staged bytes are removed). Default 30s.
	StallTimeout time.Duration `yaml:"stall_timeout"`
}

func (u *UploadsConfig) setDefaults() {
	if u.MaxFileBytes == 0 {
		u.MaxFileBytes = 32 << 20
	}
	if u.MaxThreadBytes == 0 {
		u.MaxThreadBytes = 256 << 20
	}
	if u.MaxInFlightPerPrincipal == 0 {
		u.MaxInFlightPerPrincipal = 2
	}
	if u.StallTimeout == 0 {
		u.StallTimeout = 30 * time.Second
	}
}

func (c *Config) validateAgentsAndUploads() error {
	if b := c.BootstrapAgent; b != "" && (!agentNameRE.MatchString(b) || b == defaultAgentName) {
		return fmt.Errorf("runtime.bootstrap_agent: %q must be 1..64 of [a-z0-9-] and not %q", b, defaultAgentName)
	}
	if c.Uploads.MaxFileBytes < 1 {
		return errors.New("runtime.uploads.max_file_bytes: must be >= 1")
	}
	if c.Uploads.MaxThreadBytes < c.Uploads.MaxFileBytes {
		return fmt.Errorf("runtime.uploads.max_thread_bytes: must be >= max_file_bytes (%d)", c.Uploads.MaxFileBytes)
	}
	if n := c.Uploads.MaxInFlightPerPrincipal; n < 1 || n > 1024 {
		return fmt.Errorf("runtime.uploads.max_in_flight_per_principal: must be between 1 and 1024, got %d", n)
	}
	if d := c.Uploads.StallTimeout; d < 0 || d > uploadTimeout {
		return fmt.Errorf("runtime.uploads.stall_timeout: must be between 0 (default 30s) and %s, got %s", uploadTimeout, d)
	}
	return nil
}

// uploadGate accounts for the uploads being received: how many each
// principal has in progress (runtime.uploads.max_in_flight_per_principal)
// and how many bytes each thread has staged, reserved as they arrive so
// that staged bytes count against runtime.uploads.max_thread_bytes before
// the last chunk (released when the upload ends, committed or not).
type uploadGate struct {
	mu       sync.Mutex
	inFlight map[string]int
	staged   map[string]int64
}

// enter takes one of principal's upload slots; false when all max are taken.
func (g *uploadGate) enter(principal string, max int) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.inFlight == nil {
		g.inFlight, g.staged = map[string]int{}, map[string]int64{}
	}
	if g.inFlight[principal] >= max {
		return false
	}
	g.inFlight[principal]++
	return true
}

func (g *uploadGate) leave(principal string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.inFlight[principal]--; g.inFlight[principal] <= 0 {
		delete(g.inFlight, principal)
	}
}

// reserve adds n staged bytes to thread when stored+staged+n stays within
// max; false (nothing reserved) otherwise.
func (g *uploadGate) reserve(thread string, stored, n, max int64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if stored+g.staged[thread]+n > max {
		return false
	}
	g.staged[thread] += n
	return true
}

func (g *uploadGate) release(thread string, n int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.staged[thread] -= n; g.staged[thread] <= 0 {
		delete(g.staged, thread)
	}
}

func tooManyUploads(max int) error {
	const key = "runtime.uploads.max_in_flight_per_principal"
	st := status.New(codes.ResourceExhausted, fmt.Sprintf("%d uploads of this principal are in progress, the most %s allows; retry when one ends", max, key))
	if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: grpcx.ReasonRateLimited, Domain: errorDomain,
		Metadata: map[string]string{"limit": key, "max_in_flight": fmt.Sprint(max)}},
		&errdetails.RetryInfo{RetryDelay: durationpb.New(time.Second)}); err == nil {
		st = d
	}
	return st.Err()
}

func uploadTooLarge(key string, limit int64, format string, args ...any) error {
	st := status.New(codes.ResourceExhausted, fmt.Sprintf(format, args...))
	if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: runtimev1.ErrorReason_ERROR_REASON_UPLOAD_TOO_LARGE.String(), Domain: errorDomain,
		Metadata: map[string]string{"limit": key, "max_bytes": fmt.Sprint(limit)}}); err == nil {
		st = d
	}
	return st.Err()
}

func uploadRefused(meta map[string]string, format string, args ...any) error {
	st := status.New(codes.FailedPrecondition, fmt.Sprintf(format, args...))
	if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: runtimev1.ErrorReason_ERROR_REASON_UPLOAD_REFUSED.String(), Domain: errorDomain, Metadata: meta}); err == nil {
		st = d
	}
	return st.Err()
}

// UploadThreadFile stores one file in the thread's uploads folder: the
// header first, then the bytes, staged in the thread folder and renamed
// into uploads/ only when complete, within the limits and, for a script or
// skill archive, accepted by the skills scan. Bytes are written as they
// arrive (memory is one message) and the stream is refused as soon as the
// file passes runtime.uploads.max_file_bytes.
func (s *Server) UploadThreadFile(stream grpc.ClientStreamingServer[runtimev1.UploadThreadFileRequest, runtimev1.UploadThreadFileResponse]) error {
	ctx := stream.Context()
	first, err := stream.Recv()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return invalid("header", grpcx.ViolationRequired, "the first message must be the header {thread_id, filename, mime_type}")
		}
		return err
	}
	h := first.GetHeader()
	if h == nil {
		return invalid("header", grpcx.ViolationRequired, "the first message must be the header {thread_id, filename, mime_type}")
	}
	if h.GetThreadId() == "" {
		return invalid("header.thread_id", grpcx.ViolationRequired, "required")
	}
	name := h.GetFilename()
	if why := runtimetools.UploadNameProblem(name); why != "" {
		return invalid("header.filename", grpcx.ViolationInvalid, "%q: %s", name, why)
	}
	if len(h.GetMimeType()) > 255 {
		return invalid("header.mime_type", grpcx.ViolationTooLong, "longer than 255 bytes")
	}
	th, p, err := s.ownThread(ctx, h.GetThreadId())
	if err != nil {
		return err
	}
	id := th.Proto.GetThreadId()
	lim := s.cfg.Uploads
	who := fmt.Sprintf("%d:%s%s", len(p.GetTenant()), p.GetTenant(), p.GetSubject())
	if !s.upGate.enter(who, lim.MaxInFlightPerPrincipal) {
		return tooManyUploads(lim.MaxInFlightPerPrincipal)
	}
	defer s.upGate.leave(who)
	st, err := s.ws.StageUpload(id, lim.MaxFileBytes)
	if err != nil {
		return storeErr(fmt.Errorf("stage upload: %w", err))
	}
	// The thread's stored uploads (but a file this one replaces) plus every
	// byte staged for it so far stay within max_thread_bytes
	// (receiveUpload reserves each chunk before writing it).
	stored, err := st.UploadsBytes(name)
	if err != nil {
		st.Discard()
		return storeErr(fmt.Errorf("uploads quota: %w", err))
	}
	// The bytes are received by a goroutine that owns the staged file and
	// its reservation, so that a client stalling mid-stream is cut (no
	// bytes for runtime.uploads.stall_timeout, or not complete after
	// uploadTimeout): the handler returns, the stream's context ends, Recv
	// fails and the goroutine's end discards the file and releases it.
	type outcome struct {
		err      error
		reserved int64
	}
	received := make(chan outcome, 1)
	progress := make(chan struct{}, 1)
	go func() {
		var reserved int64
		err := s.receiveUpload(stream, st, name, func(n int64) bool {
			if !s.upGate.reserve(id, stored, n, lim.MaxThreadBytes) {
				return false
			}
			reserved += n
			select {
			case progress <- struct{}{}:
			default:
			}
			return true
		})
		received <- outcome{err, reserved}
	}()
	timer := time.NewTimer(uploadTimeout)
	defer timer.Stop()
	stall := time.NewTimer(lim.StallTimeout)
	defer stall.Stop()
	cut := func(format string, args ...any) error {
		go func() { o := <-received; st.Discard(); s.upGate.release(id, o.reserved) }()
		return status.Errorf(codes.DeadlineExceeded, format, args...)
	}
	var o outcome
wait:
	for {
		select {
		case o = <-received:
			break wait
		case <-progress:
			stall.Reset(lim.StallTimeout) // Go 1.23 timers: no stale tick survives Reset
		case <-stall.C:
			return cut("upload of %s received no bytes for %s (runtime.uploads.stall_timeout); cut", name, lim.StallTimeout)
		case <-timer.C:
			return cut("upload of %s not complete after %s", name, uploadTimeout)
		}
	}
	defer s.upGate.release(id, o.reserved)
	err = o.err
	committed := false
	defer func() {
		if !committed {
			st.Discard()
		}
	}()
	if err != nil {
		return err
	}
	// The quota sum and the rename of one thread's uploads are serialised
	// (receiving is not: a slow client does not hold up the others).
	unlock := s.ws.Lock(id + "\x00uploads")
	defer unlock()
	others, err := st.UploadsBytes(name)
	if err != nil {
		return storeErr(fmt.Errorf("uploads quota: %w", err))
	}
	if others+st.Size() > lim.MaxThreadBytes {
		return uploadTooLarge("runtime.uploads.max_thread_bytes", lim.MaxThreadBytes,
			"the thread's uploads would hold %d bytes, more than runtime.uploads.max_thread_bytes (%d)", others+st.Size(), lim.MaxThreadBytes)
	}
	if err := s.scanUpload(ctx, st, name); err != nil {
		return err
	}
	mt := runtimetools.UploadMIME(h.GetMimeType(), name, st.Head())
	size, sum := st.Size(), st.SHA256()
	committed = true
	replaced, err := st.Commit(name)
	if err != nil {
		return storeErr(fmt.Errorf("commit upload: %w", err))
	}
	s.log.InfoContext(ctx, "file uploaded", "thread", id, "file", name, "bytes", size, "replaced", replaced)
	return stream.SendAndClose(&runtimev1.UploadThreadFileResponse{File: &runtimev1.UploadedFile{
		VirtualPath: "/mnt/user-data/uploads/" + name, SizeBytes: size, Sha256: sum, MimeType: mt, Replaced: replaced}})
}

// uploadTimeout bounds one upload from its header to its last chunk.
const uploadTimeout = 10 * time.Minute

// receiveUpload writes the chunks of stream into st until the client closes
// its side; a second header or a file over max_file_bytes ends it.
//
// reserve is asked for each chunk's bytes before they are written; false
// refuses the upload (runtime.uploads.max_thread_bytes).
func (s *Server) receiveUpload(stream grpc.ClientStreamingServer[runtimev1.UploadThreadFileRequest, runtimev1.UploadThreadFileResponse], st *runtimetools.StagedUpload, name string, reserve func(int64) bool) error {
	lim := s.cfg.Uploads
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if m.GetHeader() != nil {
			return invalid("header", grpcx.ViolationInvalid, "only the first message may be a header")
		}
		c := m.GetChunk()
		if st.Size()+int64(len(c)) > lim.MaxFileBytes {
			return uploadTooLarge("runtime.uploads.max_file_bytes", lim.MaxFileBytes, "%s is larger than runtime.uploads.max_file_bytes (%d bytes)", name, lim.MaxFileBytes)
		}
		if len(c) > 0 && !reserve(int64(len(c))) {
			return uploadTooLarge("runtime.uploads.max_thread_bytes", lim.MaxThreadBytes,
				"the thread's uploads, stored and being received, would pass runtime.uploads.max_thread_bytes (%d bytes)", lim.MaxThreadBytes)
		}
		if _, err := st.Write(c); errors.Is(err, runtimetools.ErrUploadTooLarge) {
			return uploadTooLarge("runtime.uploads.max_file_bytes", lim.MaxFileBytes, "%s is larger than runtime.uploads.max_file_bytes (%d bytes)", name, lim.MaxFileBytes)
		} else if err != nil {
			return storeErr(fmt.Errorf("write upload: %w", err))
		}
	}
}

// scanUpload reviews a script or skill archive through the skills
// service's deterministic scan (the rules of skill packages; a script is
// scanned as a skill's scripts/ file, i.e. as a program). A CRITICAL
// finding or an archive refusal (path traversal, symlink, bomb, binary)
// refuses the upload; data files are stored as sent. Skills unreachable:
// the upload fails (fail closed).
func (s *Server) scanUpload(ctx context.Context, st *runtimetools.StagedUpload, name string) error {
	kind := runtimetools.UploadKind(name, st.Head())
	if kind == runtimetools.UploadData {
		return nil
	}
	if kind == runtimetools.UploadUnscannable {
		return uploadRefused(map[string]string{"code": "unscannable_archive"},
			"%s is an archive or compressed stream the scan cannot open (only zip and tar.gz are scanned); it is refused, not stored unscanned", name)
	}
	limit := int64(s.env.MaxMessageBytes) - 64<<10
	if limit <= 0 {
		limit = 4<<20 - 64<<10
	}
	if st.Size() > limit {
		return uploadRefused(map[string]string{"code": "too_large_to_scan"},
			"%s is a %s of %d bytes; at most %d bytes can be scanned (server.max_message_bytes)", name, kind, st.Size(), limit)
	}
	data, err := st.Bytes(limit)
	if err != nil {
		return storeErr(err)
	}
	// A .skill must be a skill package; a .zip or .tar.gz may hold anything
	// and has its entries scanned.
	req := &skillsv1.ScanSkillRequest{Source: &skillsv1.ScanSkillRequest_Archive{Archive: data},
		ArchiveEntries: !strings.HasSuffix(strings.ToLower(name), ".skill")}
	if kind == runtimetools.UploadScript {
		ext := strings.ToLower(path.Ext(name))
		if strings.ContainsAny(ext, " \t") || len(ext) > 16 {
			ext = ""
		}
		// The script as the one program of a minimal package (the scan
		// needs a SKILL.md; this one is clean by construction).
		req.Source = &skillsv1.ScanSkillRequest_Files{Files: &skillsv1.InlineFiles{Name: "upload",
			Files: []*skillsv1.SkillFile{{Path: "SKILL.md", Content: []byte(uploadSkillMD)}, {Path: "scripts/upload" + ext, Content: data}}}}
	}
	resp, err := s.skills.ScanSkill(runtimeident.ActingFor(ctx), req)
	if status.Code(err) == codes.InvalidArgument {
		code := ""
		for _, d := range status.Convert(err).Details() {
			if ei, ok := d.(*errdetails.ErrorInfo); ok && ei.GetMetadata()["code"] != "" {
				code = ei.GetMetadata()["code"]
			}
		}
		return uploadRefused(map[string]string{"code": code}, "%s was refused as a skill archive: %s", name, status.Convert(err).Message())
	}
	if err != nil {
		return statusErr(codes.Unavailable, runtimev1.ErrorReason_ERROR_REASON_UPSTREAM_UNAVAILABLE,
			"the skills scan of %s failed (%s); the upload is refused", name, status.Code(err))
	}
	if resp.GetReport().GetBlocked() {
		var ids []string
		for _, f := range resp.GetReport().GetFindings() {
			if f.GetSeverity() == skillsv1.Severity_SEVERITY_CRITICAL {
				ids = append(ids, f.GetRuleId())
			}
		}
		return uploadRefused(map[string]string{"rule_ids": strings.Join(ids, ",")},
			"%s was refused by the scan: %d CRITICAL finding(s): %s", name, len(ids), strings.Join(ids, ", "))
	}
	return nil
}

// uploadSkillMD wraps an uploaded script for the scan.
const uploadSkillMD = "---\nname: upload\ndescription: An uploaded script, scanned as a program.\n---\nUploaded script.\n"

// uploadRoute is the REST form of UploadThreadFile
// (docs/decisions/0150-where-acp-and-workspace-servers-run.md): one or more
// multipart/form-data parts named "file", each forwarded as it is read over
// the client stream on the gateway's connection, with the caller's
// credential (the gRPC chain authenticates, validates and limits). A body
// whose Content-Length exceeds max_thread_bytes plus 1 MiB of multipart
// framing is refused before it is read; no body is ever buffered.
const uploadRoute = "POST /v1/threads/{thread_id}/uploads"

// HTTPRoutes implements the app's httpRouter: the multipart upload route.
func (s *Server) HTTPRoutes() map[string]http.Handler {
	return map[string]http.Handler{uploadRoute: http.HandlerFunc(s.serveUpload)}
}

func (s *Server) serveUpload(w http.ResponseWriter, r *http.Request) {
	limit := s.cfg.Uploads.MaxThreadBytes + 1<<20
	if r.ContentLength > limit {
		writeHTTPStatus(w, uploadTooLarge("runtime.uploads.max_thread_bytes", s.cfg.Uploads.MaxThreadBytes,
			"request body of %d bytes is larger than runtime.uploads.max_thread_bytes (%d) plus 1 MiB", r.ContentLength, s.cfg.Uploads.MaxThreadBytes))
		return
	}
	if s.gw == nil {
		writeHTTPStatus(w, status.Error(codes.Unavailable, "the upload route is not connected"))
		return
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" {
		writeHTTPStatus(w, invalid("body", grpcx.ViolationInvalid, "Content-Type must be multipart/form-data with one or more parts named \"file\""))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	mr, err := r.MultipartReader()
	if err != nil {
		writeHTTPStatus(w, invalid("body", grpcx.ViolationInvalid, "%v", err))
		return
	}
	ctx, err := forwardCredentials(r)
	if err != nil {
		writeHTTPStatus(w, err)
		return
	}
	// A stalled client is cut: the whole request within uploadTimeout.
	// and a body that stops arriving for runtime.uploads.stall_timeout.
	ctx, cancel := context.WithTimeout(ctx, uploadTimeout)
	defer cancel()
	rc, deadline := http.NewResponseController(w), time.Now().Add(uploadTimeout)
	extend := func() {
		d := time.Now().Add(s.cfg.Uploads.StallTimeout)
		if d.After(deadline) {
			d = deadline
		}
		_ = rc.SetReadDeadline(d)
	}
	extend()
	client := runtimev1.NewRuntimeServiceClient(s.gw)
	var files []*runtimev1.UploadedFile
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			writeHTTPStatus(w, invalid("body", grpcx.ViolationInvalid, "multipart body: %v", err))
			return
		}
		if part.FormName() != "file" {
			part.Close()
			continue
		}
		f, err := s.forwardPart(ctx, client, r.PathValue("thread_id"), part, extend)
		part.Close()
		if err != nil {
			writeHTTPStatus(w, err)
			return
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		writeHTTPStatus(w, invalid("file", grpcx.ViolationRequired, "no multipart part named \"file\""))
		return
	}
	out := `{"files":[`
	for i, f := range files {
		b, _ := protojson.MarshalOptions{UseProtoNames: true, EmitDefaultValues: true}.Marshal(f)
		if i > 0 {
			out += ","
		}
		out += string(b)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, out+"]}\n")
}

// partFilename is the file name exactly as the client sent it
// (multipart.Part.FileName would reduce "../x" to "x"; the RPC judges the
// name as given).
func partFilename(h map[string][]string) string {
	cd := ""
	if v := h["Content-Disposition"]; len(v) > 0 {
		cd = v[0]
	}
	_, params, err := mime.ParseMediaType(cd)
	if err != nil {
		return ""
	}
	return params["filename"]
}

// uploadChunk is the size of the chunk messages the route sends.
const uploadChunk = 256 << 10

// forwardPart streams one multipart part over UploadThreadFile. When the
// server refuses midway (too large, bad name) the send fails and the
// status comes from CloseAndRecv; the rest of the part is not read.
//
// extend is called before each read of the body (it moves the read
// deadline on by runtime.uploads.stall_timeout).
func (s *Server) forwardPart(ctx context.Context, client runtimev1.RuntimeServiceClient, threadID string, part *multipart.Part, extend func()) (*runtimev1.UploadedFile, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := client.UploadThreadFile(ctx)
	if err != nil {
		return nil, err
	}
	hdr := &runtimev1.UploadHeader{ThreadId: threadID, Filename: partFilename(part.Header), MimeType: part.Header.Get("Content-Type")}
	if err := stream.Send(&runtimev1.UploadThreadFileRequest{Part: &runtimev1.UploadThreadFileRequest_Header{Header: hdr}}); err != nil {
		_, err = stream.CloseAndRecv()
		return nil, err
	}
	buf := make([]byte, uploadChunk)
	for {
		extend()
		n, rerr := part.Read(buf)
		if n > 0 {
			if err := stream.Send(&runtimev1.UploadThreadFileRequest{Part: &runtimev1.UploadThreadFileRequest_Chunk{Chunk: buf[:n]}}); err != nil {
				_, err = stream.CloseAndRecv()
				return nil, err
			}
		}
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			var mbe *http.MaxBytesError
			if errors.As(rerr, &mbe) {
				return nil, uploadTooLarge("runtime.uploads.max_thread_bytes", s.cfg.Uploads.MaxThreadBytes,
					"request body is larger than runtime.uploads.max_thread_bytes (%d) plus 1 MiB", s.cfg.Uploads.MaxThreadBytes)
			}
			return nil, invalid("body", grpcx.ViolationInvalid, "multipart body: %v", rerr)
		}
	}
	resp, err := stream.CloseAndRecv()
	if err != nil {
		return nil, err
	}
	return resp.GetFile(), nil
}

// forwardCredentials carries the caller's credential and acting-for
// principal (base64 on HTTP, as through the gateway) into gRPC metadata.
func forwardCredentials(r *http.Request) (context.Context, error) {
	md := metadata.MD{}
	if v := r.Header.Get("Authorization"); v != "" {
		md.Set("authorization", v)
	}
	if v := r.Header.Get("X-Request-Id"); v != "" {
		md.Set("x-request-id", v)
	}
	if v := r.Header.Get(auth.ActingForHeader); v != "" {
		md.Set(auth.ActingForHeader, v)
	}
	if v := r.Header.Get(auth.PrincipalHeader); v != "" {
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			return nil, invalid(auth.PrincipalHeader, grpcx.ViolationInvalid, "not base64")
		}
		md.Set(auth.PrincipalHeader, string(b))
	}
	return metadata.NewOutgoingContext(r.Context(), md), nil
}

// writeHTTPStatus writes a gRPC status as the gateway does: the HTTP code
// of the gRPC code and the google.rpc.Status as JSON.
func writeHTTPStatus(w http.ResponseWriter, err error) {
	st := status.Convert(err)
	b, _ := protojson.MarshalOptions{UseProtoNames: true}.Marshal(st.Proto())
	code := gwruntime.HTTPStatusFromCode(st.Code())
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok && ei.GetReason() == runtimev1.ErrorReason_ERROR_REASON_UPLOAD_TOO_LARGE.String() {
			code = http.StatusRequestEntityTooLarge
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}
