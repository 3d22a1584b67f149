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
	"time"

	gwruntime "github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

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
}

func (u *UploadsConfig) setDefaults() {
	if u.MaxFileBytes == 0 {
		u.MaxFileBytes = 32 << 20
	}
	if u.MaxThreadBytes == 0 {
		u.MaxThreadBytes = 256 << 20
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
	return nil
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
	th, _, err := s.ownThread(ctx, h.GetThreadId())
	if err != nil {
		return err
	}
	id := th.Proto.GetThreadId()
	lim := s.cfg.Uploads
	st, err := s.ws.StageUpload(id, lim.MaxFileBytes)
	if err != nil {
		return storeErr(fmt.Errorf("stage upload: %w", err))
	}
	// The bytes are received by a goroutine that owns the staged file, so
	// that a client stalling mid-stream is cut at uploadTimeout: the handler
	// returns, the stream's context ends, Recv fails and the goroutine
	// discards the file.
	received := make(chan error, 1)
	go func() { received <- s.receiveUpload(stream, st, name) }()
	timer := time.NewTimer(uploadTimeout)
	defer timer.Stop()
	select {
	case err = <-received:
	case <-timer.C:
		go func() { <-received; st.Discard() }()
		return status.Errorf(codes.DeadlineExceeded, "upload of %s not complete after %s", name, uploadTimeout)
	}
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
func (s *Server) receiveUpload(stream grpc.ClientStreamingServer[runtimev1.UploadThreadFileRequest, runtimev1.UploadThreadFileResponse], st *runtimetools.StagedUpload, name string) error {
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
		if _, err := st.Write(m.GetChunk()); errors.Is(err, runtimetools.ErrUploadTooLarge) {
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
	ctx, cancel := context.WithTimeout(ctx, uploadTimeout)
	defer cancel()
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(uploadTimeout))
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
		f, err := s.forwardPart(ctx, client, r.PathValue("thread_id"), part)
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
func (s *Server) forwardPart(ctx context.Context, client runtimev1.RuntimeServiceClient, threadID string, part *multipart.Part) (*runtimev1.UploadedFile, error) {
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
