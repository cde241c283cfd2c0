# SPDX-License-Identifier: BSD-3-Clause
# Converts a librpma fio job file (librpma_{apm,gpspm,aof}_{client,server}) to remora's engine:
#   sed -f fio/librpma-to-remora.sed librpma_gpspm-client.fio >gpspm-client.fio
#   REMORA_FIO_ENGINE=$PWD/build/fio/libremora_fio.so fio gpspm-client.fio
# The edits, which docs/install.md lists:
#   1. ioengine=librpma_<method>_<role>  ->  ioengine=external:${REMORA_FIO_ENGINE}
#   2. role=<role> after it (the engine has one library for both sides; role is required)
#   3. clients: the method becomes flush= (apm -> raw, gpspm -> gpspm; aof's mode=hw -> raw,
#      mode=sw -> gpspm)
#   4. clients: kb_base=1000, so that blocksize=4KiB means 4096 bytes (librpma's server jobs say
#      kb_base=1000, its client jobs do not, and fio's default reads 4KiB as 4000 bytes)
# A trailing comment on a converted line goes; every other line is kept as it is.
s/^ioengine=librpma_\(apm\|gpspm\|aof\)_server\([[:space:]#].*\)\?$/ioengine=external:${REMORA_FIO_ENGINE}\nrole=server/
s/^ioengine=librpma_apm_client\([[:space:]#].*\)\?$/ioengine=external:${REMORA_FIO_ENGINE}\nrole=client\nflush=raw\nkb_base=1000/
s/^ioengine=librpma_gpspm_client\([[:space:]#].*\)\?$/ioengine=external:${REMORA_FIO_ENGINE}\nrole=client\nflush=gpspm\nkb_base=1000/
s/^ioengine=librpma_aof_client\([[:space:]#].*\)\?$/ioengine=external:${REMORA_FIO_ENGINE}\nrole=client\nkb_base=1000/
s/^mode=hw\([[:space:]#].*\)\?$/flush=raw/
s/^mode=sw\([[:space:]#].*\)\?$/flush=gpspm/
