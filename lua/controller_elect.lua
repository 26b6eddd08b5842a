--[[
  CONTROLLER_ELECT_MASTER (1002) from a broker or the admin, and the controller's own trigger
  (the scan of sets whose master is no longer alive): ReplicasInfoManager.electMaster and its
  ElectMasterEvent in one step, so any number of workers may ask at once. A trigger is fenced by
  the masterEpoch its worker saw: once another worker has elected (or cleared the master), the
  epoch differs and this call writes nothing.
  Input:
    KEYS[1] namespace prefix "nsfleet:{<ns>}"
    ARGV[i], read as arg_<name> (nsfleet/store/scripts.py, ControllerElectArgs):
    ARGV[1] arg_name             brokerName (the broker set)
    ARGV[2] arg_requester        brokerId asking, "" for the controller's trigger
    ARGV[3] arg_designate        "1" = elect arg_requester if it can be (the admin's
                                 designateElect), "0" = by the policy
    ARGV[4] arg_unclean          "1" = enableElectUncleanMaster
    ARGV[5] arg_expected_epoch   the masterEpoch a trigger saw, "" for a request
  Output: (elect() in lua/includes/controller.lua says what follows each status)
    {"ok", ...}                  a new master
    {"still", ...}               the old master stays: nothing written (2011)
    {"unknown"}                  no such broker set (2010)
    {"none"}                     the trigger found no candidate: the master cleared (2004)
    {"failed"}                   a request found no candidate: nothing written (2012)
    {"fenced"}                   a trigger whose masterEpoch is no longer the set's
]]
--- @include "rcall"
--- @include "keys"
--- @include "clock"
--- @include "controller"

if arg_expected_epoch ~= '' and
    rcall('HGET', k_ctl_set(arg_name), 'masterEpoch') ~= arg_expected_epoch then
  return {'fenced'}
end
local requester = arg_requester ~= '' and arg_requester or nil
return elect(arg_name, requester, arg_designate == '1', arg_unclean == '1', now_ms())
