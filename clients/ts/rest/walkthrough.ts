// Calls Toolplane's REST gateway through the TypeScript client that
// @hey-api/openapi-ts generates from /openapi.json (converted to OpenAPI 3 by
// swagger2openapi). scripts/openapi-check.sh generates the client into
// ./openapi-client beside this file's compiled copy and runs it against a
// running binary; nothing here is hand-written HTTP.
//
// Custom methods (`POST /v1/threads/{thread_id}:assemble`) need no
// workaround: the generator keeps the template as the URL and substitutes
// thread_id, leaving `:assemble` literal. Authentication: the spec's scheme
// is an `Authorization` apiKey header (Swagger 2.0 has no bearer type), so
// `auth` returns the whole header value, `Bearer <token>`.
import { assembleTools, createThread, getThread, listThreads } from './openapi-client';
import { client } from './openapi-client/client.gen';
import { createClient, createConfig } from './openapi-client/client';

const base = process.env.TOOLPLANE_URL || 'http://127.0.0.1:7421';
const token = process.env.EDITOR_TOKEN || 'tp-demo-editor';

let passed = 0;
function check(what: string, ok: boolean, detail?: unknown): void {
  if (!ok) {
    console.error(`  FAILED: ${what}${detail === undefined ? '' : `: ${JSON.stringify(detail)}`}`);
    console.log(`openapi-client: ${passed} passed, 1 failed`);
    process.exit(1);
  }
  passed += 1;
  console.log(`  ok: ${what}`);
}

async function main(): Promise<void> {
  client.setConfig({ baseUrl: base, auth: () => `Bearer ${token}` });

  const created = await createThread({ body: {} });
  const threadId = created.data?.thread?.thread_id ?? '';
  check('createThread (POST /v1/threads) returns a thread id', created.response?.status === 200 && threadId !== '', created.error);

  const asm = await assembleTools({ path: { thread_id: threadId }, body: { user_message: 'hello' } });
  console.log(`  ${asm.request?.method} ${new URL(asm.request?.url ?? "http://x/").pathname} -> ${asm.response?.status}`);
  check('assembleTools calls the custom-method route /v1/threads/{thread_id}:assemble',
    new URL(asm.request?.url ?? "http://x/").pathname === `/v1/threads/${threadId}:assemble` && asm.request?.method === 'POST');
  const bound = (asm.data?.tools ?? []).map((t) => t.name);
  check('assembleTools answers 200 with the built-in tools bound', asm.response?.status === 200 && bound.includes('read_file'), asm.error ?? bound);
  check('and the deferred list (empty: no MCP servers here)', Array.isArray(asm.data?.deferred) && asm.data?.deferred?.length === 0, asm.data?.deferred);

  const got = await getThread({ path: { thread_id: threadId } });
  check('getThread returns the same thread', got.data?.thread?.thread_id === threadId, got.error);

  // An id holding ':' is refused (the generator percent-encodes it; the
  // gateway decodes it and answers 400 naming the field).
  const bad = await getThread({ path: { thread_id: `${threadId}:assemble` } });
  check('getThread with "<id>:assemble" is 400 INVALID_ARGUMENT, not the thread',
    bad.response?.status === 400 && bad.error?.code === 3 && (bad.error?.message ?? '').startsWith('thread_id:'), bad.error);

  const anonymous = createClient(createConfig({ baseUrl: base }));
  const anon = await listThreads({ client: anonymous });
  check('without a credential: 401 UNAUTHENTICATED (code 16)', anon.response?.status === 401 && anon.error?.code === 16, anon.error);

  console.log(`openapi-client: ${passed} passed, 0 failed`);
}

main().catch((e) => {
  console.error(`openapi-client: ${e && e.stack ? e.stack : e}`);
  console.log(`openapi-client: ${passed} passed, 1 failed`);
  process.exit(1);
});
