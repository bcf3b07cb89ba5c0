#!/bin/sh
# The project's check: exits 0 when add is right.
. ./calc.sh
got=$(add 2 3)
if [ "$got" = 5 ]; then echo "PASS add 2 3 = 5"; else echo "FAIL add 2 3: want 5, got $got"; exit 1; fi
