"""The walk-through over gRPC from Python (see ../../README.md), on the
generated stubs and Debian's grpcio: create a thread, assemble (few schemas
bound, many names deferred), a deferred call refused, tool_search, the
promoted call succeeding, a write tool working for the editor and denied for
the viewer, another principal's thread NOT_FOUND, and the error details
(google.rpc.ErrorInfo, BadRequest) of refused calls decoded. Every step is
checked.

    /usr/bin/python3 clients/python/walkthrough.py   # TOOLPLANE_GRPC (default 127.0.0.1:7420)

Tokens: EDITOR_TOKEN / VIEWER_TOKEN / ADMIN_TOKEN (default the demo tokens
of examples/README.md).
"""

import os
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import grpc  # noqa: E402

import toolplane_client as tp  # noqa: E402
from toolplane_client import catalog_pb2 as catm, catalog_service_pb2 as cat, runtime_pb2 as rt, runtime_service_pb2 as rts  # noqa: E402
from toolplane_client import error_details_pb2  # noqa: E402

ADDR = os.environ.get("TOOLPLANE_GRPC", "127.0.0.1:7420")
editor = tp.connect(ADDR, os.environ.get("EDITOR_TOKEN", "tp-demo-editor"))
viewer = tp.connect(ADDR, os.environ.get("VIEWER_TOKEN", "tp-demo-viewer"))
admin = tp.connect(ADDR, os.environ.get("ADMIN_TOKEN", "tp-demo-admin"))
anonymous = tp.connect(ADDR)

passed = 0


def check(what, ok, detail=""):
    global passed
    if not ok:
        print("  FAILED: %s%s" % (what, ": " + str(detail) if detail else ""), file=sys.stderr)
        print("walkthrough-python: %d passed, 1 failed" % passed)
        sys.exit(1)
    passed += 1
    print("  ok: " + what)


def step(s):
    print("\n== " + s)


def text(r):
    return "".join(b.text for b in r.content)


seq = 0


def call(client, thread, name, args):
    global seq
    seq += 1
    req = rts.ExecuteToolCallRequest(
        thread_id=thread,
        tool_call=rt.ToolCall(id="py-%d" % seq, name=name, arguments=tp.to_struct(args)))
    return client.runtime.ExecuteToolCall(req).result


def wait_for_servers():
    for _ in range(150):
        try:
            r = admin.catalog.ListServers(cat.ListServersRequest(), timeout=5)
            ready = [s for s in r.servers if s.config.name in ("everything", "memory")
                     and s.state == catm.SERVER_STATE_READY]
            if len(ready) == 2:
                return
        except grpc.RpcError:
            pass
        time.sleep(0.2)


def main():
    wait_for_servers()

    step("1. create a thread (editor)")
    thread = editor.runtime.CreateThread(rts.CreateThreadRequest()).thread
    print("  thread " + thread.thread_id)
    check("thread created", bool(thread.thread_id))

    step("2. assemble the first turn")
    asm = editor.runtime.AssembleTools(rts.AssembleToolsRequest(thread_id=thread.thread_id, user_message="hello"))
    bound = [t.name for t in asm.tools]
    print("  bound %s; %d deferred; catalog hash %s" % (bound, len(asm.deferred), asm.catalog_hash))
    check("tool_search is bound", "tool_search" in bound)
    check("everything_get-sum is deferred, not bound",
          "everything_get-sum" in asm.deferred and "everything_get-sum" not in bound)
    ts = next(t for t in asm.tools if t.name == "tool_search")
    check("schemas come in OpenAI and Anthropic form",
          tp.from_struct(ts.openai).get("type") == "function" and "input_schema" in tp.from_struct(ts.anthropic))

    step("3. call a deferred tool before tool_search: refused, not run")
    r = call(editor, thread.thread_id, "everything_get-sum", {"a": 2, "b": 3})
    print("  %s %s %s: %s" % (rt.ToolCallStatus.Name(r.status), rt.ErrorKind.Name(r.error_kind), r.reason_code, text(r)))
    check("refused with deferred.not_promoted", r.reason_code == "deferred.not_promoted")

    step("4. tool_search promotes")
    r = call(editor, thread.thread_id, "tool_search", {"query": "select:everything_get-sum,memory_create_entities"})
    print("  promoted %s" % list(r.promoted.names))
    check("everything_get-sum promoted", "everything_get-sum" in r.promoted.names)

    step("5. the promoted call succeeds")
    r = call(editor, thread.thread_id, "everything_get-sum", {"a": 2, "b": 3})
    print("  %s: %s" % (rt.ToolCallStatus.Name(r.status), text(r)))
    check("2 + 3 = 5", text(r) == "The sum of 2 and 3 is 5.")
    r = call(editor, thread.thread_id, "memory_create_entities", {
        "entities": [{"name": "walkthrough-python", "entityType": "test",
                      "observations": ["created over gRPC from Python"]}]})
    check("the editor may write (memory_create_entities)", r.status == rt.TOOL_CALL_STATUS_SUCCESS, text(r))

    step("6. the viewer: write tools are neither listed nor callable")
    v = viewer.runtime.CreateThread(rts.CreateThreadRequest()).thread
    vasm = viewer.runtime.AssembleTools(rts.AssembleToolsRequest(thread_id=v.thread_id, user_message="hello"))
    check("memory_create_entities not in the viewer's deferred set", "memory_create_entities" not in vasm.deferred)
    r = call(viewer, v.thread_id, "memory_create_entities", {"entities": []})
    print("  %s %s %s: %s" % (rt.ToolCallStatus.Name(r.status), rt.ErrorKind.Name(r.error_kind), r.reason_code, text(r)))
    # A policy decision (authz.denied, authz.condition_failed, ...), not an authz failure.
    check("denied by authz", r.reason_code.startswith("authz.") and r.reason_code != "authz.evaluator_error")

    step("7. another principal cannot see the editor's thread")
    try:
        viewer.runtime.GetThread(rts.GetThreadRequest(thread_id=thread.thread_id))
        check("NOT_FOUND for another principal", False, "GetThread succeeded")
    except grpc.RpcError as e:
        check("NOT_FOUND for another principal", e.code() == grpc.StatusCode.NOT_FOUND, e.details())

    step("8. error details: google.rpc.ErrorInfo and BadRequest decoded")
    try:
        anonymous.runtime.ListThreads(rts.ListThreadsRequest())
        check("no credential is UNAUTHENTICATED", False, "ListThreads succeeded")
    except grpc.RpcError as e:
        infos = [d for d in tp.details(e) if isinstance(d, error_details_pb2.ErrorInfo)]
        print("  %s: %s; ErrorInfo %s" % (e.code().name, e.details(),
                                          [(i.domain, i.reason) for i in infos]))
        check("no credential is UNAUTHENTICATED", e.code() == grpc.StatusCode.UNAUTHENTICATED, e.details())
        check("with a google.rpc.ErrorInfo naming the reason", len(infos) == 1 and infos[0].reason != "", infos)
    try:
        editor.runtime.ExecuteToolCall(rts.ExecuteToolCallRequest(thread_id=thread.thread_id))
        check("a call without tool_call is INVALID_ARGUMENT", False, "ExecuteToolCall succeeded")
    except grpc.RpcError as e:
        bad = [d for d in tp.details(e) if isinstance(d, error_details_pb2.BadRequest)]
        fields = [fv.field for b in bad for fv in b.field_violations]
        print("  %s: %s; BadRequest fields %s" % (e.code().name, e.details(), fields))
        check("a call without tool_call is INVALID_ARGUMENT", e.code() == grpc.StatusCode.INVALID_ARGUMENT, e.details())
        # Validation errors carry a google.rpc.BadRequest naming the field
        # (docs/decisions/0030-error-model.md).
        check("its google.rpc.BadRequest names tool_call", fields == ["tool_call"], fields)
    http_addr = os.environ.get("TOOLPLANE_HTTP")
    if http_addr:
        # The REST gateway refuses an id holding ':' with a BadRequest; the
        # generated google.rpc modules decode its JSON body too.
        url = "http://%s/v1/threads/%s:assemble" % (http_addr, thread.thread_id)
        req = urllib.request.Request(url, headers={"Authorization": "Bearer " + os.environ.get("EDITOR_TOKEN", "tp-demo-editor")})
        try:
            urllib.request.urlopen(req, timeout=10)
            check("GET <thread>:assemble is refused with 400", False, "200")
        except urllib.error.HTTPError as e:
            st = tp.status_from_json(e.read().decode())
            bad = [d for d in tp.unpack(st) if isinstance(d, error_details_pb2.BadRequest)]
            print("  REST %d: %s" % (e.code, st.message))
            check("GET <thread>:assemble is refused with 400", e.code == 400, e.code)
            check("its google.rpc.BadRequest names thread_id",
                  len(bad) == 1 and [f.field for f in bad[0].field_violations] == ["thread_id"], bad)

    print("\nwalkthrough-python: %d passed, 0 failed" % passed)


if __name__ == "__main__":
    try:
        main()
    except grpc.RpcError as e:
        print("walkthrough-python: %s %s" % (e.code(), e.details()), file=sys.stderr)
        print("walkthrough-python: %d passed, 1 failed" % passed)
        sys.exit(1)
