// Compares `puremetal tokenize` with HF's own tokenizers library (its Rust
// code, through the npm package `tokenizers`) on random text: seeded
// random strings of ASCII, white space, Unicode of every plane and Qwen's
// added tokens, encoded with Qwen3's tokenizer.json and with the same file
// given Qwen3.5's pre-tokenizer expression, and random id sequences
// decoded with and without skip_special_tokens. Exits 1 on a difference.
//
// From the repository root, with the package installed outside it:
//
//   npm install --prefix /tmp/hftok tokenizers@0.23.2
//   go build -o /tmp/puremetal ./cmd/puremetal
//   NODE_PATH=/tmp/hftok/node_modules node testdata/tokenizer/crosscheck.mjs /tmp/puremetal
import { createRequire } from 'node:module';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { gunzipSync } from 'node:zlib';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const require = createRequire(join(process.env.NODE_PATH ?? '.', 'x.js'));
const { Tokenizer } = require('tokenizers');
const puremetal = process.argv[2];
if (!puremetal) {
  console.error('usage: node crosscheck.mjs PATH_TO_PUREMETAL');
  process.exit(2);
}

const here = dirname(fileURLToPath(import.meta.url));
const qwen3 = JSON.parse(gunzipSync(readFileSync(join(here, 'tokenizer.json.gz'))).toString('utf8'));
const qwen35 = structuredClone(qwen3);
qwen35.pre_tokenizer.pretokenizers[0].pattern.Regex =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

let seed = 20261207;
const random = (n) => {
  seed = (seed * 1103515245 + 12345) % 2147483648;
  return seed % n;
};
const pieces = [...' \t\n\r\u00a0\u2003\u3000\u0085\u200b\u2028', "'s", "'LL", "'ſ", '<|im_end|>', '<think>', '<tool_call>', 'e\u0301', '\r\n', '   '];
function randomText() {
  let s = '';
  for (let n = 1 + random(40); n > 0; n--) {
    const r = random(100);
    let cp;
    if (r < 30) cp = 0x20 + random(0x5f);
    else if (r < 40) { s += pieces[random(pieces.length)]; continue; }
    else if (r < 85) cp = 0xa0 + random(0xfffe - 0xa0);
    else cp = 0x10000 + random(0x100000);
    if (cp >= 0xd800 && cp <= 0xdfff) cp = 0x41; // no lone surrogates
    s += String.fromCodePoint(cp);
  }
  return s;
}
const texts = Array.from({ length: 5000 }, randomText);
const idSeqs = Array.from({ length: 2000 }, () => Array.from({ length: 1 + random(20) }, () => random(151669)));

function run(args, input) {
  return JSON.parse(execFileSync(puremetal, ['tokenize', ...args], { input: JSON.stringify(input), maxBuffer: 1 << 28 }).toString('utf8'));
}
let differences = 0;
function compare(what, want, got) {
  const bad = want.filter((w, i) => JSON.stringify(w) !== JSON.stringify(got[i])).length;
  console.log(`${what}: ${bad} of ${want.length} differ`);
  differences += bad;
}

for (const [name, json] of [['Qwen3', qwen3], ['Qwen3.5 expression', qwen35]]) {
  const dir = mkdtempSync(join(tmpdir(), 'crosscheck-'));
  writeFileSync(join(dir, 'tokenizer.json'), JSON.stringify(json));
  const hf = Tokenizer.fromString(JSON.stringify(json));
  const want = [];
  for (const s of texts) want.push((await hf.encode(s, null, { addSpecialTokens: false })).getIds());
  compare(`${name}: encode`, want, run(['-model', dir, '-json'], texts));
  if (json === qwen3) {
    for (const skip of [false, true]) {
      const wantText = [];
      for (const ids of idSeqs) wantText.push(await hf.decode(ids, skip));
      compare(`${name}: decode, skip_special_tokens=${skip}`, wantText, run(['-model', dir, '-json', '-decode', ...(skip ? ['-skip-special'] : [])], idSeqs));
    }
  }
}
process.exit(differences > 0 ? 1 : 0);
