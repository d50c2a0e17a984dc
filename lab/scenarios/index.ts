// Every lab scenario, in the order `deno task lab` runs them. Add new ones here.
import type { Scenario } from "../lib/scenario.ts";
import { scenario as applyFiles } from "./apply_files.ts";
import { scenario as openrcBoot } from "./openrc_boot.ts";
import { scenario as linkCut } from "./link_cut.ts";
import { scenario as archNode } from "./arch_node.ts";
import { scenario as openrcNode } from "./openrc_node.ts";

/** All scenarios. */
export const SCENARIOS: readonly Scenario[] = [
  applyFiles,
  openrcBoot,
  linkCut,
  archNode,
  openrcNode,
];
