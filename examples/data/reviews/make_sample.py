"""Builds the demo sample from its upstream source: the npm package `sentiment` 5.0.2 (MIT), whose
test/fixtures/{imdb,amazon,yelp}.json hold the UCI "Sentiment Labelled Sentences" data (Kotzias et al., KDD 2015,
CC BY 4.0). Usage:  npm pack sentiment@5.0.2 && tar xzf sentiment-5.0.2.tgz
                    python3 make_sample.py package/test/fixtures
Writes train.tsv and dev.tsv (label<TAB>sentence, 1 = positive): whitespace collapsed, case-insensitive
duplicates dropped, every 8th sentence (after a fixed shuffle) to dev."""
import json
import os
import random
import sys

src = sys.argv[1]
seen, rows = set(), []
for name in ("imdb", "amazon", "yelp"):
    with open(os.path.join(src, name + ".json"), encoding="utf-8") as f:
        for item in json.load(f):
            text = " ".join(item["text"].split())
            if not text or text.lower() in seen:
                continue
            seen.add(text.lower())
            rows.append((int(item["class"]), text))
random.Random(20261122).shuffle(rows)
here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "train.tsv"), "w", encoding="utf-8") as tr, \
        open(os.path.join(here, "dev.tsv"), "w", encoding="utf-8") as dv:
    for i, (label, text) in enumerate(rows):
        (dv if i % 8 == 0 else tr).write(f"{label}\t{text}\n")
print(len(rows), "sentences")
