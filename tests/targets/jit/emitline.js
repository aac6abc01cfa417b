// JIT frames for $ustack (tests/e2e/test_jit.py): run under
// node --perf-basic-prof, which names the JIT code in /tmp/perf-PID.map.
// Prints "ready", waits for a line on stdin, then driveLoop() calls
// emitLine() N times, each one fs.writeSync() (a write(2)) to /dev/null;
// prints "done N" and exits.
'use strict';
const fs = require('fs');

const N = parseInt(process.argv[2] || '2000', 10);
const out = fs.openSync('/dev/null', 'w');
let written = 0;

function emitLine(i) {
  written += fs.writeSync(out, 'line ' + (i % 10) + '\n');
}

function driveLoop(n) {
  for (let i = 0; i < n; i++)
    emitLine(i);
}

process.stdout.write('ready\n');
fs.readSync(0, Buffer.alloc(16));
driveLoop(N);
process.stdout.write(`done ${N} ${written}\n`);
