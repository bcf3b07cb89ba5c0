# A scripted "agent" that keeps trying the same wrong fix: it never touches the real bug.
n=${LOOPCTL_ITERATION:-1}
echo "attempt $n: tweak the error message" >> notes.txt
sleep 0.1
