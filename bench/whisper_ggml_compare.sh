#!/bin/bash
# Candle vs whisper.cpp on the same whisper.cpp ggml files, 2 threads, greedy, wall time and peak RSS.
# usage: bench/whisper_ggml_compare.sh   (W: whisper-cli, A: the audio, MODELS: dir of {tiny,base}-{f16,q8_0,q5_0}.bin
#        written by `candle quantize DIR OUT.bin TYPE`)
cd "$(dirname "$0")/.."
W=${W:-whisper-cli}
A=${A:?the audio file}
MODELS=${MODELS:?the folder of ggml files}
# CANDLE_OPTS: more candle transcribe options (--dtype f16 keeps an f16 file in f16)
out=$(mktemp -d)
echo "model	type	engine	rep	wall_s	rss_mb"
for m in tiny base; do for t in f16 q8_0 q5_0; do for rep in 1 2; do
  f=$MODELS/$m-$t.bin
  /usr/bin/time -f "%e %M" -o $out/tm ./build/bin/candle transcribe -m $f -f $A -t 2 --beam 1 --language en $CANDLE_OPTS > $out/candle-$m-$t.txt 2>/dev/null
  read e r < $out/tm; echo "$m	$t	candle	$rep	$e	$((r/1024))"
  OMP_WAIT_POLICY=PASSIVE /usr/bin/time -f "%e %M" -o $out/tm $W -m $f -f $A -t 2 -bs 1 -l en -otxt -of $out/wcpp-$m-$t > /dev/null 2>&1
  read e r < $out/tm; echo "$m	$t	whisper.cpp	$rep	$e	$((r/1024))"
done; done; done
