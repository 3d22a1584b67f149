'use strict';
// Toolplane from Node.js over gRPC: @grpc/grpc-js with @grpc/proto-loader on
// the repository's .proto files (no generated code). Every service's client
// is built from proto/toolplane/<svc>/v1/<svc>_service.proto; calls carry the
// bearer token as `authorization` metadata, like every Toolplane client.
//
//   const tp = require('./toolplane');
//   const c = tp.connect('127.0.0.1:7420', process.env.TOOLPLANE_TOKEN);
//   const {thread} = await c.runtime.CreateThread({});
//
// google.protobuf.Struct fields (tool arguments, schemas) are plain objects
// on this API: toStruct / fromStruct convert.
const path = require('path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

const PROTO_ROOT = process.env.TOOLPLANE_PROTO_DIR || path.join(__dirname, '..', '..', 'proto');

const definition = protoLoader.loadSync(
  ['runtime', 'catalog', 'authz', 'skills'].map((s) => `toolplane/${s}/v1/${s}_service.proto`),
  { includeDirs: [PROTO_ROOT], keepCase: true, longs: String, enums: String, defaults: true, oneofs: true },
);
const pkg = grpc.loadPackageDefinition(definition);

// toValue / fromValue convert between JSON values and google.protobuf.Value.
function toValue(v) {
  if (v === null || v === undefined) return { nullValue: 'NULL_VALUE' };
  if (typeof v === 'number') return { numberValue: v };
  if (typeof v === 'string') return { stringValue: v };
  if (typeof v === 'boolean') return { boolValue: v };
  if (Array.isArray(v)) return { listValue: { values: v.map(toValue) } };
  return { structValue: toStruct(v) };
}
function toStruct(obj) {
  const fields = {};
  for (const [k, v] of Object.entries(obj || {})) fields[k] = toValue(v);
  return { fields };
}
function fromValue(v) {
  if (!v) return null;
  switch (v.kind) {
    case 'nullValue': return null;
    case 'numberValue': return v.numberValue;
    case 'stringValue': return v.stringValue;
    case 'boolValue': return v.boolValue;
    case 'listValue': return (v.listValue.values || []).map(fromValue);
    case 'structValue': return fromStruct(v.structValue);
    default: return null;
  }
}
function fromStruct(s) {
  const out = {};
  for (const [k, v] of Object.entries((s && s.fields) || {})) out[k] = fromValue(v);
  return out;
}

// promisify turns a unary method of a grpc-js client into (req) => Promise.
function promisify(client, token, deadlineMs) {
  const wrapped = {};
  for (const name of Object.keys(Object.getPrototypeOf(client))) {
    const fn = client[name];
    if (typeof fn !== 'function' || fn.requestStream || fn.responseStream || name.startsWith('$')) continue;
    wrapped[name] = (req) => new Promise((resolve, reject) => {
      const md = new grpc.Metadata();
      if (token) md.set('authorization', `Bearer ${token}`);
      fn.call(client, req, md, { deadline: Date.now() + deadlineMs }, (err, res) => (err ? reject(err) : resolve(res)));
    });
  }
  wrapped.raw = client;
  return wrapped;
}

// connect returns promise-returning clients of the four services at addr
// (HOST:PORT, plaintext; pass grpc.credentials.createSsl(...) for TLS).
function connect(addr, token, { credentials = grpc.credentials.createInsecure(), deadlineMs = 30000 } = {}) {
  const v1 = (svc) => pkg.toolplane[svc].v1;
  const mk = (svc, Ctor) => promisify(new (v1(svc)[Ctor])(addr, credentials), token, deadlineMs);
  return {
    runtime: mk('runtime', 'RuntimeService'),
    catalog: mk('catalog', 'CatalogService'),
    authz: mk('authz', 'AuthzService'),
    skills: mk('skills', 'SkillsService'),
  };
}

module.exports = { connect, toStruct, fromStruct, grpc };
