import { createServer, type Server } from 'node:http';
import client from 'prom-client';

/**
 * The token-less metrics listener of METRICS_PORT (for a scraper on a private network; bind it to a
 * private address with METRICS_HOST). `collect` produces the text: this process's registry, or in
 * the cluster primary the sum over the workers (prom-client's AggregatorRegistry).
 */
export async function startMetricsListener(port: number, host: string, collect: () => Promise<{ text: string; contentType: string }>): Promise<Server> {
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' || path !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
      return;
    }
    collect().then(
      ({ text, contentType }) => res.writeHead(200, { 'content-type': contentType, 'cache-control': 'no-store' }).end(text),
      (err: Error) => res.writeHead(500, { 'content-type': 'text/plain' }).end(`metrics unavailable: ${err.message}\n`),
    );
  });
  server.requestTimeout = 10_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return server;
}

/** In a cluster worker: hands this process's registry to the primary's aggregator. */
export function shareWithClusterPrimary(registry: client.Registry) {
  client.AggregatorRegistry.setRegistries([registry]);
  // prom-client installs the worker's answer to the primary's request only when an
  // AggregatorRegistry is constructed in the worker; without it the primary's scrape timed out.
  new client.AggregatorRegistry();
}

/** In the cluster primary: the workers' metrics summed (gauges read from the database: max). */
export function clusterCollector() {
  const aggregator = new client.AggregatorRegistry();
  return async () => ({ text: await aggregator.clusterMetrics(), contentType: aggregator.contentType });
}
