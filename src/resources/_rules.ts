/** Rules shared by the kinds that manage paths (file, directory, a container's mounts). */
import { isWithin, ownRelation } from "../declaration/paths.ts";
import type { RuleScope } from "./kind.ts";

/**
 * A path a resource manages (a file, a directory, a container's mount source):
 * inside a managed root, never a root itself nor above one, never one of the
 * host's own paths, inside one, or above one.
 */
export function checkManagedPath(path: string, at: string, scope: RuleScope): void {
  const relation = ownRelation(path, scope.own);
  if (relation?.relation === "inside") {
    scope.problems.push({
      path: at,
      message: `${path} belongs to the host itself (${relation.own}); ` +
        "the host never manages its own files",
    });
    return;
  }
  if (!scope.roots.some((root) => isWithin(path, root))) {
    scope.problems.push({
      path: at,
      message: `${path} is outside the managed roots (${scope.roots.join(", ")})`,
    });
    return;
  }
  const root = scope.roots.find((r) => isWithin(r, path));
  if (root !== undefined) {
    scope.problems.push({
      path: at,
      message: root === path
        ? `${path} is a managed root itself; declare what lies inside it, never the root`
        : `${path} contains the managed root ${root}; declare what lies inside a root`,
    });
    return;
  }
  if (relation?.relation === "contains") {
    scope.problems.push({
      path: at,
      message: `${path} contains the host's own ${relation.own}: whoever controls a directory ` +
        "above the host's files can replace them, so a declaration may neither manage it nor " +
        "mount it into a container; declare a path below it that holds none of the host's files",
    });
  }
}
