/**
 * The distributions, one line each (each file: what is true of that distribution and of
 * nothing else, ./distribution.ts). Adding one: its file, its line here, its packaging folder
 * (packaging/<id>/) and its lab scenarios (docs/contributing.md, "Add a distribution";
 * tests/stub_distribution_test.ts counts them).
 */
import type { Distribution } from "./distribution.ts";
import { ARCH } from "./arch.ts";
import { ALPINE } from "./alpine.ts";
import { DEBIAN } from "./debian.ts";

export type { Distribution, PackageManagerFacts } from "./distribution.ts";

/** Every distribution the host is packaged for, in the order builds and docs list them. */
export const DISTRIBUTIONS = [ARCH, ALPINE, DEBIAN] as const;

/** A distribution's id: its build and its packaging folder. */
export type DistroId = (typeof DISTRIBUTIONS)[number]["id"];

/** The distribution of an id. */
export function distribution(id: DistroId): Distribution<DistroId> {
  return DISTRIBUTIONS.find((d) => d.id === id)!;
}
