/* Model files for the in-page models: fetched from this site only, kept by the browser's Cache API after the first
 * visit, with progress. Each file's URL carries the first characters of its sha256 (`?v=...`, from the model's
 * meta.json), so a rebuilt model is fetched anew and an old copy is never used for it.
 */
export const CACHE_NAME = 'annotated-transformer-models-v1';

async function openCache() {
  try { return globalThis.caches ? await caches.open(CACHE_NAME) : null; } catch { return null; }  // file:// or private mode
}

/** Fetch `url` as bytes, from the cache when it holds it. onProgress(loaded, total, fromCache) as bytes arrive. */
export async function fetchBytes(url, {onProgress = () => {}, cache = true} = {}) {
  const store = cache ? await openCache() : null;
  if (store) {
    const hit = await store.match(url);
    if (hit) {
      const bytes = new Uint8Array(await hit.arrayBuffer());
      onProgress(bytes.length, bytes.length, true);
      return bytes;
    }
  }
  let res;
  try { res = await fetch(url); } catch (e) { throw new Error(`${url}: could not be fetched (${e.message})`); }
  if (!res.ok) throw new Error(`${url}: the server answered ${res.status} ${res.statusText}`.trim());
  const total = Number(res.headers.get('content-length')) || 0;
  let bytes;
  if (res.body && res.body.getReader) {
    const reader = res.body.getReader(), parts = [];
    let loaded = 0;
    for (;;) {
      const {done, value} = await reader.read();
      if (done) break;
      parts.push(value); loaded += value.length;
      onProgress(loaded, Math.max(total, loaded), false);
    }
    bytes = new Uint8Array(loaded);
    let o = 0;
    for (const p of parts) { bytes.set(p, o); o += p.length; }
  } else bytes = new Uint8Array(await res.arrayBuffer());
  onProgress(bytes.length, bytes.length, false);
  if (store) {
    try { await store.put(url, new Response(bytes, {headers: {'content-type': 'application/octet-stream'}})); } catch { /* quota: fine */ }
  }
  return bytes;
}

/** Bytes in a human unit: 12.3 MB. */
export function megabytes(n) { return `${(n / 1e6).toFixed(1)} MB`; }
