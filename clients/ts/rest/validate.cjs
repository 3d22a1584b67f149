'use strict';
// Validates an OpenAPI document (Swagger 2.0 or OpenAPI 3.x) with
// @apidevtools/swagger-parser: JSON Schema of the spec version plus its
// semantic checks (path parameters declared and required, unique
// operationIds, resolvable $refs). TS_TOOLS is the install folder of
// clients/ts/install.sh.
//
//   node validate.cjs <spec.json>...
const { createRequire } = require('module');
const path = require('path');
const req = createRequire(path.join(process.env.TS_TOOLS, 'package.json'));
const SwaggerParser = req('@apidevtools/swagger-parser');

(async () => {
  for (const file of process.argv.slice(2)) {
    try {
      const api = await SwaggerParser.validate(file);
      const ops = Object.values(api.paths).reduce((n, item) => n + Object.keys(item).filter((k) => ['get', 'put', 'post', 'delete', 'patch'].includes(k)).length, 0);
      console.log(`validate: ${file}: valid ${api.swagger ? `Swagger ${api.swagger}` : `OpenAPI ${api.openapi}`}, ${api.info.title} ${api.info.version}, ${Object.keys(api.paths).length} paths, ${ops} operations`);
    } catch (e) {
      console.error(`validate: ${file}: ${e.message}`);
      process.exit(1);
    }
  }
})();
