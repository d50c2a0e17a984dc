// Every lab scenario, in the order `deno task lab` runs them. Add new ones here.
import type { Scenario } from "../lib/scenario.ts";
import { scenario as applyFiles } from "./apply_files.ts";
import { scenario as openrcBoot } from "./openrc_boot.ts";
import { scenario as linkCut } from "./link_cut.ts";
import { scenario as firstNode } from "./first_node.ts";
import { scenario as join } from "./join.ts";
import { scenario as disconnected } from "./disconnected.ts";
import { scenario as isolation } from "./isolation.ts";
import { scenario as selfUpgrade } from "./self_upgrade.ts";
import { scenario as archNode } from "./arch_node.ts";
import { scenario as openrcNode } from "./openrc_node.ts";
import { scenario as archInstall } from "./arch_install.ts";
import { scenario as archUpgrade } from "./arch_upgrade.ts";
import { scenario as archRollback } from "./arch_rollback.ts";
import { scenario as debianInstall } from "./debian_install.ts";
import { scenario as debianUpgrade } from "./debian_upgrade.ts";
import { scenario as debianRollback } from "./debian_rollback.ts";
import { scenario as openrcInstall } from "./openrc_install.ts";
import { scenario as tarballFloor } from "./tarball_floor.ts";
import { scenario as noGlibc } from "./no_glibc.ts";
import { scenario as arm64Tarball } from "./arm64_tarball.ts";
import { scenario as tarballRollback } from "./tarball_rollback.ts";
import { scenario as tarballUpgrade } from "./tarball_upgrade.ts";
import { scenario as rebootSystemd } from "./reboot_systemd.ts";
import { scenario as rebootOpenrc } from "./reboot_openrc.ts";
import { scenario as offlineBoot } from "./offline_boot.ts";
import { scenario as conntrack } from "./conntrack.ts";
import { scenario as firewall } from "./firewall.ts";
import { scenario as confirm } from "./confirm.ts";
import { scenario as overlay } from "./overlay.ts";
import { scenario as restartOnChange } from "./restart_on_change.ts";
import { scenario as substrate } from "./substrate.ts";
import { scenario as outbox } from "./outbox.ts";
import { scenario as contentRef } from "./content_ref.ts";
import { scenario as brokerFailover } from "./broker_failover.ts";
import { scenario as fleet } from "./fleet.ts";
import { scenario as site } from "./site.ts";
import { scenario as certificates } from "./certificates.ts";
import { scenario as holdRescue } from "./hold_rescue.ts";
import { scenario as accounts } from "./accounts.ts";
import { scenario as mounts } from "./mounts.ts";
import { scenario as stagedRollout } from "./staged_rollout.ts";

/** All scenarios. */
export const SCENARIOS: readonly Scenario[] = [
  applyFiles,
  openrcBoot,
  linkCut,
  firstNode,
  join,
  disconnected,
  isolation,
  selfUpgrade,
  archNode,
  openrcNode,
  archInstall,
  archUpgrade,
  archRollback,
  debianInstall,
  debianUpgrade,
  debianRollback,
  openrcInstall,
  tarballFloor,
  noGlibc,
  arm64Tarball,
  tarballRollback,
  tarballUpgrade,
  rebootSystemd,
  rebootOpenrc,
  offlineBoot,
  conntrack,
  firewall,
  confirm,
  overlay,
  restartOnChange,
  substrate,
  holdRescue,
  outbox,
  contentRef,
  brokerFailover,
  fleet,
  site,
  certificates,
  accounts,
  mounts,
  stagedRollout,
];
