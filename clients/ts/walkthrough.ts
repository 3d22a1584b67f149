// Toolplane from TypeScript over gRPC: the stubs protoc-gen-es generated
// into gen/ (make generate; never edited by hand) with connect-es's gRPC
// transport for Node (HTTP/2, h2c on loopback). clients/ts/run.sh compiles
// and runs it against a binary it starts. Every step is checked.
//
// Covers: a thread created and read back, tools assembled, a caller's
// threads listed, another principal's thread NOT_FOUND, and a refused call's
// google.rpc.ErrorInfo decoded with the generated error_details module.
import { create } from '@bufbuild/protobuf';
import { Code, ConnectError, createClient, type Interceptor } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { ErrorInfoSchema } from './gen/google/rpc/error_details_pb';
import { AssembleToolsRequestSchema, RuntimeService } from './gen/toolplane/runtime/v1/runtime_service_pb';

const addr = process.env.TOOLPLANE_GRPC || '127.0.0.1:7420';

function bearer(token?: string): Interceptor {
  return (next) => async (req) => {
    if (token) req.header.set('authorization', `Bearer ${token}`);
    return next(req);
  };
}

function runtime(token?: string) {
  const transport = createGrpcTransport({ baseUrl: `http://${addr}`, interceptors: [bearer(token)], defaultTimeoutMs: 30000 });
  return createClient(RuntimeService, transport);
}

let passed = 0;
function check(what: string, ok: boolean, detail?: unknown): void {
  if (!ok) {
    console.error(`  FAILED: ${what}${detail === undefined ? '' : `: ${String(detail)}`}`);
    console.log(`walkthrough-ts: ${passed} passed, 1 failed`);
    process.exit(1);
  }
  passed += 1;
  console.log(`  ok: ${what}`);
}

async function main(): Promise<void> {
  const editor = runtime(process.env.EDITOR_TOKEN || 'tp-demo-editor');
  const viewer = runtime(process.env.VIEWER_TOKEN || 'tp-demo-viewer');
  const anonymous = runtime();

  const { thread } = await editor.createThread({});
  const id = thread?.threadId ?? '';
  console.log(`  thread ${id}`);
  check('CreateThread returns a thread id', id !== '');

  const asm = await editor.assembleTools(create(AssembleToolsRequestSchema, { threadId: id, userMessage: 'hello' }));
  const bound = asm.tools.map((t) => t.name);
  console.log(`  bound ${JSON.stringify(bound)}`);
  check('AssembleTools binds the built-in tools, in OpenAI form', bound.includes('read_file') &&
    (asm.tools.find((t) => t.name === 'read_file')?.openai as { type?: string } | undefined)?.type === 'function');

  const got = await editor.getThread({ threadId: id });
  check('GetThread reads it back', got.thread?.threadId === id);
  const list = await editor.listThreads({});
  check("ListThreads lists it among the editor's threads", list.threads.some((t) => t.threadId === id));

  try {
    await viewer.getThread({ threadId: id });
    check('another principal gets NOT_FOUND', false, 'GetThread succeeded');
  } catch (e) {
    check('another principal gets NOT_FOUND', ConnectError.from(e).code === Code.NotFound, e);
  }

  try {
    await anonymous.listThreads({});
    check('no credential: UNAUTHENTICATED', false, 'ListThreads succeeded');
  } catch (e) {
    const err = ConnectError.from(e);
    const infos = err.findDetails(ErrorInfoSchema);
    console.log(`  ${Code[err.code]}: ${err.rawMessage}; ErrorInfo ${JSON.stringify(infos.map((i) => [i.domain, i.reason]))}`);
    check('no credential: UNAUTHENTICATED', err.code === Code.Unauthenticated, err.message);
    check('with a google.rpc.ErrorInfo decoded by the generated module', infos.length === 1 && infos[0].reason !== '', JSON.stringify(infos));
  }

  console.log(`\nwalkthrough-ts: ${passed} passed, 0 failed`);
}

main().catch((e) => {
  console.error(`walkthrough-ts: ${e && e.stack ? e.stack : e}`);
  console.log(`walkthrough-ts: ${passed} passed, 1 failed`);
  process.exit(1);
});
