import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { FastifyInstance } from 'fastify';
import { openApiJson } from './document.js';

const require = createRequire(import.meta.url);

/** The Redoc standalone bundle shipped by the pinned `redoc` package (no CDN). */
let redocBundle: Buffer | undefined;
function redoc(): Buffer {
  redocBundle ??= readFileSync(require.resolve('redoc/bundles/redoc.standalone.js'));
  return redocBundle;
}

const DOCS_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>pixgate API reference</title>
</head>
<body>
<redoc spec-url="/openapi.json" expand-responses="200,201" path-in-middle-panel></redoc>
<script src="/docs/redoc.standalone.js"></script>
</body>
</html>
`;

/** GET /openapi.json (the OpenAPI 3.1 document) and GET /docs (its rendered reference). */
export async function openApiRoutes(app: FastifyInstance) {
  app.get('/openapi.json', async (_req, reply) => reply.type('application/json; charset=utf-8').header('cache-control', 'no-cache').send(openApiJson()));
  app.get('/docs', async (_req, reply) => reply.type('text/html; charset=utf-8').send(DOCS_HTML));
  app.get('/docs/redoc.standalone.js', async (_req, reply) =>
    reply.type('application/javascript; charset=utf-8').header('cache-control', 'public, max-age=86400').send(redoc()),
  );
}
