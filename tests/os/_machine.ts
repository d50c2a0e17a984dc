/** Lab machines for adapter tests: raised with this helper's prefix, reached with nsenter. */
import { Lab } from "../../lab/lib/mod.ts";
import type { Machine } from "../../lab/lib/machine.ts";

/** Whether machines can be raised here (the lab needs root). */
export const CAN_RAISE: boolean = Deno.uid() === 0;

/** The name of a test that needs a lab machine, saying why it may be skipped. */
export function machineTest(name: string): string {
  return CAN_RAISE ? name : `${name} (skipped: lab machines need root)`;
}

/** A lab with one machine; dispose to tear both down. */
export interface OneMachine extends AsyncDisposable {
  lab: Lab;
  machine: Machine;
  /** The argv prefix that runs a program inside the machine. */
  via: string[];
}

/** Raise one machine of a flavour in its own lab (prefix "noxad"). */
export async function oneMachine(flavour: "systemd" | "openrc" | "plain"): Promise<OneMachine> {
  const lab = await Lab.start({ prefix: "noxad" });
  try {
    const machine = await lab.raise({ name: `${flavour}1`, flavour, network: false });
    return {
      lab,
      machine,
      via: ["nsenter", "-t", String(machine.leader), "-a", "--"],
      [Symbol.asyncDispose]: () => lab.stop(),
    };
  } catch (error) {
    await lab.stop();
    throw error;
  }
}
