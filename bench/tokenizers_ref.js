// Reference tokenizer throughput for `qkv bench bpe|wordpiece`: Hugging Face's tokenizers (Rust, npm
// tokenizers@0.23.2) on the same ~10 MB of text (../shared/data/lm/train.txt and both columns of
// translation/train.tsv), loading the staged tokenizer.json files. Prints JSON lines with the same fields.
//   mkdir -p /tmp/tokref && (cd /tmp/tokref && npm install tokenizers@0.23.2)   # not committed
//   node bench/tokenizers_ref.js /tmp/tokref/node_modules ../shared
const fs = require('fs'), path = require('path');
const [mods, shared] = process.argv.slice(2);
const { Tokenizer } = require(path.join(mods, 'tokenizers'));
const texts = [];
for (const l of fs.readFileSync(path.join(shared, 'data/lm/train.txt'), 'utf8').split('\n')) if (l) texts.push(l);
for (const l of fs.readFileSync(path.join(shared, 'data/translation/train.tsv'), 'utf8').split('\n'))
  if (l) for (const p of l.split('\t')) texts.push(p);
const mb = texts.reduce((s, t) => s + Buffer.byteLength(t, 'utf8'), 0) / 1e6;

async function measure(name, file, batch) {
  const tok = Tokenizer.fromFile(path.join(shared, 'pretrained', file));
  const t0 = process.hrtime.bigint();
  let tokens = 0;
  if (batch) { // encodeBatch uses the library's own thread pool
    for (let i = 0; i < texts.length; i += 4096) {
      const enc = await tok.encodeBatch(texts.slice(i, i + 4096), { addSpecialTokens: false });
      for (const e of enc) tokens += e.getIds().length;
    }
  } else {
    for (const t of texts) tokens += (await tok.encode(t, { addSpecialTokens: false })).getIds().length;
  }
  const s = Number(process.hrtime.bigint() - t0) / 1e9;
  console.log(JSON.stringify({ bench: 'hf_tokenizers', config: name, mode: batch ? 'encode_batch' : 'encode',
    texts: texts.length, mb, tokens, seconds: s, mb_per_s: mb / s }));
}
(async () => {
  await measure('bpe', 'gpt2-tokenizer/tokenizer.json', true);
  await measure('wordpiece', 'bert-base-uncased-tokenizer/tokenizer.json', true);
})();
