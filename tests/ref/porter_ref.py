"""Reference stems for the Porter stemmer test: NLTK's PorterStemmer (default NLTK_EXTENSIONS mode, as rouge-score
uses it) applied to the distinct [a-z0-9]+ tokens longer than 3 characters (the ones rouge-score stems) of the shared
data sets, plus the irregular forms. Writes tests/fixtures/porter_stems.tsv ("word\tstem" lines, sorted).

Run with Debian's interpreter and python3-nltk installed:
    /usr/bin/python3 tests/ref/porter_ref.py [SHARED_DIR]     (default: ../shared next to the repository)
"""
import os
import re
import sys

from nltk.stem.porter import PorterStemmer

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "..", "shared")
SOURCES = ["data/lm/dev.txt", "data/summarization/dev.tsv", "data/sentiment/dev.tsv"]
LIMIT = 6000

words = set()
for rel in SOURCES:
    with open(os.path.join(SHARED, rel), encoding="utf-8") as f:
        for line in f:
            for w in re.split(r"[^a-z0-9]+", line.lower()):
                if len(w) > 3:
                    words.add(w)
# A spread over the alphabet rather than the first LIMIT words in sort order.
words = sorted(words)
step = max(1, len(words) // LIMIT)
chosen = set(words[::step])
chosen |= {"skies", "dying", "lying", "tying", "news", "innings", "outings", "cannings", "howe", "proceed",
           "exceed", "succeed", "flies", "dies", "spied", "died", "happy", "enjoy", "generalli", "hopefulli",
           "archaeology", "geology", "controll", "rolling", "conflated", "troubled", "sized", "hopping", "falling",
           "hissing", "fizzed", "failing", "filing", "relational", "conditional", "valenci", "digitizer",
           "vietnamization", "operator", "feudalism", "decisiveness", "sensibiliti", "triplicate", "formative",
           "electrical", "goodness", "revival", "allowance", "airliner", "gyroscopic", "adoption", "communism",
           "bowdlerize", "probate", "cease", "agreed", "feed", "motoring", "yyyy", "syzygy", "2000s"}
stemmer = PorterStemmer()
out = os.path.join(HERE, "..", "fixtures", "porter_stems.tsv")
with open(out, "w", encoding="utf-8") as f:
    for w in sorted(chosen):
        f.write(f"{w}\t{stemmer.stem(w)}\n")
print(f"wrote {len(chosen)} stems to {out}")
