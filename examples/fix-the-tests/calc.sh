# A tiny "project": add two numbers. It has a bug the loop will fix.
add() { echo $(( $1 - $2 )); }
