#!/bin/sh
# A scripted stand-in for a coding agent, so the example runs with no agent installed.
# loopctl gives it the rendered prompt on stdin (and in $LOOPCTL_PROMPT_FILE).
prompt=$(cat)
echo "agent: phase $LOOPCTL_PHASE, iteration $LOOPCTL_ITERATION/$LOOPCTL_MAX_ITERATIONS"
echo "agent: prompt was: $(echo "$prompt" | head -n 1)"
case "$LOOPCTL_PHASE" in
  fix)
    if [ "$LOOPCTL_ITERATION" -lt 2 ]; then
      echo "agent: first guess: the test must be wrong... leaving the code alone"
    else
      sed 's/\$1 - \$2/$1 + $2/' calc.sh > calc.sh.new && mv calc.sh.new calc.sh
      echo "agent: fixed add() in calc.sh (subtraction -> addition)"
    fi ;;
  *) echo "agent: nothing to do" ;;
esac
