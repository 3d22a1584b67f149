'use strict';
// The walk-through over gRPC from Node.js (see ../../README.md): create a
// thread, assemble (few schemas bound, many names deferred), a deferred call
// refused, tool_search, the promoted call succeeding, a write tool working
// for the editor and denied for the viewer. Every step is checked.
//
//   node clients/node/walkthrough.js            # TOOLPLANE_GRPC (default 127.0.0.1:7420)
// Tokens: EDITOR_TOKEN / VIEWER_TOKEN (default the demo tokens of examples/README.md).
const tp = require('./toolplane');

const addr = process.env.TOOLPLANE_GRPC || '127.0.0.1:7420';
const editor = tp.connect(addr, process.env.EDITOR_TOKEN || 'tp-demo-editor');
const viewer = tp.connect(addr, process.env.VIEWER_TOKEN || 'tp-demo-viewer');
const admin = tp.connect(addr, process.env.ADMIN_TOKEN || 'tp-demo-admin');

let passed = 0;
function check(what, ok, detail) {
  if (!ok) {
    console.error(`  FAILED: ${what}${detail ? `: ${detail}` : ''}`);
    console.log(`walkthrough-node: ${passed} passed, 1 failed`);
    process.exit(1);
  }
  passed += 1;
  console.log(`  ok: ${what}`);
}
const step = (s) => console.log(`\n== ${s}`);
const text = (r) => (r.content || []).map((b) => b.text).join('');
let seq = 0;
async function call(client, thread, name, args) {
  seq += 1;
  const res = await client.runtime.ExecuteToolCall({
    thread_id: thread,
    tool_call: { id: `node-${seq}`, name, arguments: tp.toStruct(args) },
  });
  return res.result;
}

async function waitForServers() {
  for (let i = 0; i < 150; i += 1) {
    try {
      // Listing servers needs an admin credential; wait until the two MCP
      // servers the walk-through uses are READY.
      const r = await admin.catalog.ListServers({});
      const ready = (r.servers || []).filter((s) => ['everything', 'memory'].includes(s.config.name) && s.state === 'SERVER_STATE_READY');
      if (ready.length === 2) return;
    } catch (e) { /* not up yet */ }
    await new Promise((ok) => setTimeout(ok, 200));
  }
}

async function main() {
  await waitForServers();

  step('1. create a thread (editor)');
  const { thread } = await editor.runtime.CreateThread({});
  console.log(`  thread ${thread.thread_id}`);
  check('thread created', !!thread.thread_id);

  step('2. assemble the first turn');
  const asm = await editor.runtime.AssembleTools({ thread_id: thread.thread_id, user_message: 'hello' });
  const bound = asm.tools.map((t) => t.name);
  console.log(`  bound ${JSON.stringify(bound)}; ${asm.deferred.length} deferred; catalog hash ${asm.catalog_hash}`);
  check('tool_search is bound', bound.includes('tool_search'));
  check('everything_get-sum is deferred, not bound', asm.deferred.includes('everything_get-sum') && !bound.includes('everything_get-sum'));
  const ts = asm.tools.find((t) => t.name === 'tool_search');
  check('schemas come in OpenAI and Anthropic form', tp.fromStruct(ts.openai).type === 'function' && !!tp.fromStruct(ts.anthropic).input_schema);

  step('3. call a deferred tool before tool_search: refused, not run');
  let r = await call(editor, thread.thread_id, 'everything_get-sum', { a: 2, b: 3 });
  console.log(`  ${r.status} ${r.error_kind} ${r.reason_code}: ${text(r)}`);
  check('refused with deferred.not_promoted', r.reason_code === 'deferred.not_promoted');

  step('4. tool_search promotes');
  r = await call(editor, thread.thread_id, 'tool_search', { query: 'select:everything_get-sum,memory_create_entities' });
  console.log(`  promoted ${JSON.stringify(r.promoted && r.promoted.names)}`);
  check('everything_get-sum promoted', r.promoted && r.promoted.names.includes('everything_get-sum'));

  step('5. the promoted call succeeds');
  r = await call(editor, thread.thread_id, 'everything_get-sum', { a: 2, b: 3 });
  console.log(`  ${r.status}: ${text(r)}`);
  check('2 + 3 = 5', text(r) === 'The sum of 2 and 3 is 5.');
  r = await call(editor, thread.thread_id, 'memory_create_entities', {
    entities: [{ name: 'walkthrough-node', entityType: 'test', observations: ['created over gRPC from Node.js'] }],
  });
  check('the editor may write (memory_create_entities)', r.status === 'TOOL_CALL_STATUS_SUCCESS', text(r));

  step('6. the viewer: write tools are neither listed nor callable');
  const v = (await viewer.runtime.CreateThread({})).thread;
  const vasm = await viewer.runtime.AssembleTools({ thread_id: v.thread_id, user_message: 'hello' });
  check("memory_create_entities not in the viewer's deferred set", !vasm.deferred.includes('memory_create_entities'));
  r = await call(viewer, v.thread_id, 'memory_create_entities', { entities: [] });
  console.log(`  ${r.status} ${r.error_kind} ${r.reason_code}: ${text(r)}`);
  // A policy decision (authz.denied, authz.condition_failed, ...), not an authz failure.
  check('denied by authz', r.reason_code.startsWith('authz.') && r.reason_code !== 'authz.evaluator_error');

  step('7. another principal cannot see the editor\'s thread');
  try {
    await viewer.runtime.GetThread({ thread_id: thread.thread_id });
    check('NOT_FOUND for another principal', false, 'GetThread succeeded');
  } catch (e) {
    check('NOT_FOUND for another principal', e.code === tp.grpc.status.NOT_FOUND, e.message);
  }

  console.log(`\nwalkthrough-node: ${passed} passed, 0 failed`);
  process.exit(0);
}

main().catch((e) => {
  console.error(`walkthrough-node: ${e.stack || e}`);
  console.log(`walkthrough-node: ${passed} passed, 1 failed`);
  process.exit(1);
});
