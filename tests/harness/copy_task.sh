# Sourced by CLI tests: copy_task DIR writes a seeded copy task (source = target, 2-5 words of a 10-word
# vocabulary): DIR/train.tsv (400 pairs), DIR/dev.tsv (40), and the dev sources and references as DIR/src, DIR/ref.
copy_task() {
  for part in train:400 dev:40; do
    awk -v n="${part#*:}" -v seed="${#part}" 'BEGIN { srand(seed);
      split("alpha beta gamma delta eps zeta eta theta iota kappa", w, " ");
      for (i = 0; i < n; i++) { k = 2 + int(rand() * 4); s = w[1 + int(rand() * 10)];
        for (j = 1; j < k; j++) s = s " " w[1 + int(rand() * 10)]; print s "\t" s } }' > "$1/${part%%:*}.tsv"
  done
  cut -f1 "$1/dev.tsv" > "$1/src"
  cut -f2 "$1/dev.tsv" > "$1/ref"
}
