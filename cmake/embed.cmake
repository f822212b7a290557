# qkv_embed_file(<c-file> <symbol> <input>): writes a C source defining
#   const unsigned char <symbol>[]; const unsigned long <symbol>_len;
# holding the input's bytes, so a small data file ships inside the binary (the demo's review sample).
function(qkv_embed_file out symbol input)
  file(READ ${input} hex HEX)
  string(LENGTH "${hex}" n)
  math(EXPR len "${n} / 2")
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" bytes "${bytes}")
  file(WRITE ${out} "/* Generated from ${symbol} by cmake/embed.cmake; do not edit. */\n"
                    "const unsigned char ${symbol}[] = {\n${bytes}0x00};\nconst unsigned long ${symbol}_len = ${len};\n")
endfunction()
