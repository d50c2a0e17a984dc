/** WireGuard interfaces, the kernel's or wireguard-go: everything about this provider (os/provider.ts). */
import type { ProviderDescriptor } from "../provider.ts";
import { wireguard } from "./mod.ts";

/** The WireGuard provider; its capability is detected by ./detect.ts. */
export const PROVIDER: ProviderDescriptor<"overlay"> = {
  folder: "wireguard",
  port: "overlay",
  names: ["kernel", "userspace"],
  builds: ["every"],
  confine: { capability: "wireguard" },
  programs: {
    ip: { why: "overlay resources: WireGuard links and their addresses" },
    wg: {
      why:
        "overlay resources: WireGuard keys, port, peers (wireguard-tools); profile: wg --version",
    },
    "wireguard-go": { why: "overlay resources on a kernel without WireGuard (userspace)" },
  },
  open: ({ name, env }) => wireguard({ mode: name as "kernel" | "userspace", env }),
};
