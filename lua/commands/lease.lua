-- worker.lease: a worker process says it is alive (include/lease.lua; ours).
--
--   worker.lease  worker, seconds, [jids, [renewal, settled]]
--     -> JSON {held, reaped, reclaimed, failed, returned}
--
-- First the workers whose lease expired are reaped (at most 10 per call; none right after a
-- stall of the server, see include/lease.lua): `reaped` of them, whose jobs went back to
-- waiting (`reclaimed`) or failed in worker-lost (`failed`); a worker calling too late reaps
-- itself. Then `worker`'s lease runs `seconds` (more than 0, at most 3600) from now. `held`:
-- whether it had a lease not yet reaped; false on its first call and after its lease lapsed and
-- was reaped (its jobs were taken back: it must not start or finish any it still has).
-- `jids` (a JSON list, optional): the jobs the worker holds (running, popped ahead, being
-- reported). A job locked to it that two renewals at least a second apart did not name, and
-- that is not in its inbox, waits again at once without using a retry (`returned`; history
-- 'returned'): its pop's or its complete's reply was lost on the way, and it would otherwise
-- stay locked until its lock expired. Not given: nothing is reconciled.
-- `renewal` (an integer from 1: this renewal's number, counting up in the worker process) and
-- `settled` (0 to renewal - 1: the number of a renewal whose reply the worker had received
-- before it sent every pop whose reply it has not made a held job yet; with no pop in flight,
-- the latest reply it received): the pops in flight. A job is then given back only once the
-- worker is done with the pop that gave it: first found unnamed by a renewal numbered
-- `settled` or lower (include/lease.lua). Without them a job may be taken from a worker starved
-- between its pop's reply and naming the job; the worker always sends them.
-- worker.deregister drops the lease.
-- Errors: INVALID.
-- @include args
-- @include lease

local MAX_LEASE_SECONDS = 3600
-- Renewal numbers are counted exactly up to 2^53 (a renewal a second for 285 million years).
local MAX_RENEWAL = 9007199254740991

api['worker.lease'] = function(args)
  local cmd = 'WorkerLease'
  local worker = Arg.id(cmd, 'worker', args[1])
  local seconds = Arg.seconds(cmd, 'seconds', args[2], MAX_LEASE_SECONDS)
  local jids
  if args[3] ~= nil and args[3] ~= '' then
    jids = Arg.id_list(cmd, 'jids', args[3], Arg.jid, Engine.MAX_COUNT)
  end
  local renewal, settled
  if args[4] ~= nil or args[5] ~= nil then
    if not jids then Arg.fail(cmd, 'Arg "renewal" needs "jids"') end
    renewal = Arg.integer(cmd, 'renewal', args[4], 1, MAX_RENEWAL)
    settled = Arg.integer(cmd, 'settled', args[5], 0, renewal - 1)
  end
  if args[6] ~= nil then Arg.fail(cmd, 'too many arguments') end
  local reaped, reclaimed, failed = Lease.reap()
  local held = Lease.renew(worker, seconds)
  -- A worker whose lease was reaped has had its jobs taken: nothing left to reconcile.
  local returned = 0
  if jids and held then returned = Lease.reconcile(worker, jids, renewal, settled) end
  return cjson.encode({ held = held, reaped = reaped, reclaimed = reclaimed, failed = failed,
    returned = returned })
end
