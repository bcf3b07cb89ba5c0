# The check the agent never makes pass.
echo "FAIL parse_date('2026-13-01'): expected Err(InvalidMonth), got Ok(2027-01-01)" >&2
exit 1
