// Times @huggingface/transformers' tokenizer (transformers.js, in Node) on
// the golden texts with Qwen3's tokenizer.json, as BenchmarkEncode and
// BenchmarkDecode time this library's: every golden text encoded (without
// special tokens) and every golden id sequence decoded, over and over for
// about two seconds each after a warm-up, in MB/s of text.
//
// From the repository root, with the package installed outside it:
//
//   npm install --prefix /tmp/tfjs --ignore-scripts @huggingface/transformers
//   NODE_PATH=/tmp/tfjs/node_modules node testdata/tokenizer/bench.mjs
//
// It also counts the golden cases whose ids or text differ from HF's.
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const require = createRequire(join(process.env.NODE_PATH ?? '.', 'x.js'));
const { PreTrainedTokenizer, env } = require('@huggingface/transformers');

const here = dirname(fileURLToPath(import.meta.url));
const tokenizerJSON = JSON.parse(gunzipSync(readFileSync(join(here, 'tokenizer.json.gz'))).toString('utf8'));
const config = JSON.parse(readFileSync(join(here, 'tokenizer_config.json'), 'utf8'));
const golden = JSON.parse(readFileSync(join(here, 'golden.json'), 'utf8'));

let t0 = performance.now();
const tok = new PreTrainedTokenizer(tokenizerJSON, config);
const loadMs = performance.now() - t0;

const texts = golden.encode.map((c) => c.text);
const ids = golden.encode.map((c) => c.ids);
const enc = new TextEncoder();
const textBytes = texts.reduce((n, s) => n + enc.encode(s).length, 0);
const decodedBytes = golden.encode.reduce((n, c) => n + enc.encode(c.decoded).length, 0);

let encodeDiff = 0;
let decodeDiff = 0;
golden.encode.forEach((c) => {
  const got = tok.encode(c.text, { add_special_tokens: false });
  if (got.length !== c.ids.length || got.some((v, i) => v !== c.ids[i])) encodeDiff++;
  // transformers.js refuses to decode no ids (the empty text's).
  if (c.ids.length > 0 && tok.decode(c.ids) !== c.decoded) decodeDiff++;
});

// rate runs f over and over for about two seconds and returns MB/s.
function rate(bytes, f) {
  for (let i = 0; i < 5; i++) f(); // warm-up (fills the word cache)
  let n = 0;
  const start = performance.now();
  let elapsed = 0;
  while (elapsed < 2000) {
    f();
    n++;
    elapsed = performance.now() - start;
  }
  return (bytes * n) / (elapsed / 1000) / 1e6;
}

const encodeMBs = rate(textBytes, () => {
  for (const s of texts) tok.encode(s, { add_special_tokens: false });
});
const decodeMBs = rate(decodedBytes, () => {
  for (const seq of ids) if (seq.length > 0) tok.decode(seq);
});

console.log(`@huggingface/transformers ${env.version}, Node ${process.version}`);
console.log(`load ${loadMs.toFixed(0)} ms; golden cases differing: encode ${encodeDiff}/${texts.length}, decode ${decodeDiff}/${texts.length}`);
console.log(`encode ${encodeMBs.toFixed(2)} MB/s (${textBytes} bytes a pass)`);
console.log(`decode ${decodeMBs.toFixed(2)} MB/s (${decodedBytes} bytes a pass)`);
