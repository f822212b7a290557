// Reference token ids for a few thousand lines of real text, for tests/test_text_corpus.c.
//
// Encoders: Hugging Face's Rust `tokenizers` (npm tokenizers@0.23.2, prebuilt N-API binary) loading the
// tokenizer.json files of shared/pretrained (GPT-2 byte-level BPE, bert-base-uncased WordPiece), cross-checked
// for GPT-2 against OpenAI's encoder port (npm gpt-3-encoder@1.1.4). Neither package is committed:
//   mkdir /tmp/tokref && cd /tmp/tokref && npm install tokenizers@0.23.2 gpt-3-encoder@1.1.4
//   node tests/ref/gen_tokenizer_refs.js /tmp/tokref/node_modules "$QKV_SHARED" \
//        tests/fixtures/tokenizer_corpus_refs.txt
//
// Texts, in this order (the test rebuilds the same list): every line of data/lm/dev.txt; both tab-separated
// columns of every line of data/translation/dev.tsv (English then Spanish); the text column of every line of
// data/spam/dev.tsv. Output: "#" comment lines, "source <file> <texts>" lines, then one line per text:
//   <gpt2 count> <gpt2 hash> <bert count> <bert hash>
// where hash = FNV-1a 64 (hex) over the ids written in decimal joined by ',' (ids without special tokens added).
const fs = require('fs'), path = require('path');
const [mods, shared, out] = process.argv.slice(2);
if (!out) {
  console.error('usage: node gen_tokenizer_refs.js <node_modules> <shared dir> <out file>');
  process.exit(2);
}
const { Tokenizer } = require(path.join(mods, 'tokenizers'));
const openai = require(path.join(mods, 'gpt-3-encoder'));

function lines(rel) {
  const t = fs.readFileSync(path.join(shared, rel), 'utf8');
  const ls = t.split('\n');
  if (ls[ls.length - 1] === '') ls.pop();
  return ls;
}
const sources = [
  ['data/lm/dev.txt', lines('data/lm/dev.txt')],
  ['data/translation/dev.tsv', lines('data/translation/dev.tsv').flatMap(l => l.split('\t').slice(0, 2))],
  ['data/spam/dev.tsv', lines('data/spam/dev.tsv').map(l => l.slice(l.indexOf('\t') + 1))],
];

function fnv(ids) {
  let h = 0xcbf29ce484222325n;
  const s = Buffer.from(ids.join(','), 'utf8');
  for (const b of s) h = ((h ^ BigInt(b)) * 0x100000001b3n) & 0xffffffffffffffffn;
  return h.toString(16).padStart(16, '0');
}

(async () => {
  const gpt2 = Tokenizer.fromFile(path.join(shared, 'pretrained/gpt2-tokenizer/tokenizer.json'));
  const bert = Tokenizer.fromFile(path.join(shared, 'pretrained/bert-base-uncased-tokenizer/tokenizer.json'));
  const rows = ['# token ids of real text: HF tokenizers@0.23.2 (gpt2, bert-base-uncased); ' +
                'see tests/ref/gen_tokenizer_refs.js'];
  let agree = 0, total = 0;
  for (const [name, texts] of sources) rows.push(`source ${name} ${texts.length}`);
  for (const [, texts] of sources) {
    for (const text of texts) {
      const g = Array.from((await gpt2.encode(text, null, { addSpecialTokens: false })).getIds());
      const b = Array.from((await bert.encode(text, null, { addSpecialTokens: false })).getIds());
      if (!text.includes('<|endoftext|>')) {
        total++;
        if (JSON.stringify(openai.encode(text)) === JSON.stringify(g)) agree++;
      }
      rows.push(`${g.length} ${fnv(g)} ${b.length} ${fnv(b)}`);
    }
  }
  fs.writeFileSync(out, rows.join('\n') + '\n');
  console.log(`${rows.length} lines written; gpt2: HF tokenizers and gpt-3-encoder agree on ${agree}/${total} texts`);
})().catch(e => { console.error(e); process.exit(1); });
