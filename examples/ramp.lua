-- A rate ramp with a stop condition (run with: linerate gen PORT --signature --script examples/ramp.lua).
-- Steps the first stream from 10 kpps to 50 kpps, one second per step, and
-- reads the generator's counters (and the receiver's, with --rx) as it goes.
local s = streams()[1]
for rate = 10000, 50000, 10000 do
  set_rate(s, rate)
  if not sleep(1) then break end
  local st = stats()[s]
  local r = rx()
  if r and r[s] then
    log(string.format("%s at %d pps: sent %d, received %d, lost %d", s, rate, st.packets, r[s].packets, r[s].lost))
    if r[s].lost > 1000 then log("too much loss, stopping") break end
  else
    log(string.format("%s at %d pps: sent %d (%.0f pps measured)", s, rate, st.packets, st.pps))
  end
end
