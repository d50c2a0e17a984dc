/**
 * The parse's checks across resources (parse.ts `checkTogether`): who provides what a
 * resource requires, what one kind's resource touches of another's, what lies inside a
 * path declared later, and what `restartOn` names.
 */
import type { ProblemSink } from "../declaration/refused.ts";
import { kindOf, PathTree, placeOf, type Resource } from "../resources/mod.ts";

/** Who provides what (the first to), and what is touched by whom, by the kinds' hooks. */
export interface DeclaredOrder {
  provided: Map<string, { index: number; id: string }>;
  touched: Map<string, { index: number; id: string; type: string }>;
}

export function declaredOrder(resources: [number, Resource][]): DeclaredOrder {
  const order: DeclaredOrder = { provided: new Map(), touched: new Map() };
  for (const [index, resource] of resources) {
    const kind = kindOf(resource);
    for (const what of kind.provides?.(resource) ?? []) {
      if (!order.provided.has(what)) order.provided.set(what, { index, id: resource.id });
    }
    for (const key of kind.touches?.(resource) ?? []) {
      if (!order.touched.has(key)) {
        order.touched.set(key, { index, id: resource.id, type: resource.type });
      }
    }
  }
  return order;
}

/**
 * What a resource names (a file's owner) that a resource of the declaration provides (a
 * user) is provided BEFORE it: the host makes the user, then gives it the file.
 */
export function checkRequires(
  requires: readonly { what: string; field: string }[],
  index: number,
  self: string,
  at: string,
  order: DeclaredOrder,
  problems: ProblemSink,
) {
  for (const { what, field } of requires) {
    const by = order.provided.get(what);
    if (by === undefined || by.index < index) continue;
    const [type, name] = [what.slice(0, what.indexOf(":")), what.slice(what.indexOf(":") + 1)];
    problems.push({
      path: `${at}.${field}`,
      message: by.index === index
        ? `names the ${type} "${name}" this resource ("${self}") declares itself`
        : `names the ${type} "${name}", declared by resources[${by.index}] ("${by.id}") after ` +
          `this one ("${self}"): declare "${by.id}" first, so the ${type} exists before "${self}" ` +
          "is applied (the order is stated, never derived)",
    });
  }
}

/** A resource whose key another kind's resource touches (the account files) is refused. */
export function checkTouched(
  keys: Map<string, number>,
  order: DeclaredOrder,
  problems: ProblemSink,
) {
  if (order.touched.size === 0) return;
  for (const [key, index] of keys) {
    const by = order.touched.get(key);
    if (by === undefined) continue;
    const what = key.slice(key.indexOf(":") + 1);
    problems.push({
      path: `resources[${index}]`,
      message: `manages ${what}, which the ${by.type} resources of this declaration change ` +
        `(resources[${by.index}], "${by.id}"): one owner per fact; declare users and groups, ` +
        `not the file`,
    });
  }
}

/**
 * Nothing is declared before what it lies inside (each kind says where its resources lie:
 * `place`): a path below a mount's target declared before the mount is made under the mount
 * point and hidden once it is mounted, and a bind of a path in a later mount binds what is
 * under that mount point. The order is stated, never derived: the parse says so.
 */
export function checkInsideLater(resources: [number, Resource][], problems: ProblemSink) {
  const places = resources.map(([index, resource]) => [index, placeOf(resource)] as const);
  // What lies over a path (a mount over its target), by where it is declared.
  const over = new PathTree<number>();
  let mounts = 0;
  for (const [index, place] of places) {
    if (place?.over && place.encloses) over.add(place.path, index), mounts++;
  }
  if (mounts === 0) return;
  for (const [index, place] of places) {
    if (place === undefined) continue;
    // The first mount declared after this one that encloses `path` (or lies at it, `at`).
    const later = (path: string, at: boolean) => {
      let found: { path: string; mount: number } | undefined;
      over.along(path, (mount, where, end) => {
        if (found || mount <= index || (where === "at" && !at)) return;
        found = { path: path.slice(0, end), mount };
      });
      return found;
    };
    const inside = later(place.path, false);
    if (inside !== undefined) {
      problems.push({
        path: `resources[${index}]`,
        message: `${place.path} lies inside the mount at ${inside.path} ` +
          `(resources[${inside.mount}]), declared after it: it would be made under the mount ` +
          "point and hidden once that is mounted; declare the mount first",
      });
      continue;
    }
    for (const used of place.uses ?? []) {
      const holder = later(used, true);
      if (holder === undefined) continue;
      problems.push({
        path: `resources[${index}]`,
        message: `${used} lies in the mount at ${holder.path} (resources[${holder.mount}]), ` +
          "declared after this one: it would use what is under the mount point; declare the " +
          "mount first",
      });
      break;
    }
  }
}

/**
 * A resource's `restartOn` names resources declared BEFORE it: the restart happens at
 * its own position, after all of them (the order is stated, never derived).
 */
export function checkRestartOn(
  restartOn: readonly string[],
  self: string,
  at: string,
  earlier: ReadonlyMap<string, number>,
  everyId: ReadonlyMap<string, number>,
  problems: ProblemSink,
) {
  const seen = new Set<string>();
  restartOn.forEach((id, i) => {
    const path = `${at}.restartOn[${i}]`;
    if (seen.has(id)) {
      problems.push({ path, message: `names "${id}" twice` });
      return;
    }
    seen.add(id);
    if (id === self) {
      problems.push({ path, message: `names this resource itself ("${id}")` });
      return;
    }
    // `earlier` holds the ids declared so far (this one's included, refused above).
    if (earlier.has(id)) return;
    const later = everyId.get(id);
    problems.push({
      path,
      message: later === undefined
        ? `names no resource of this declaration ("${id}"); it names the id of a resource ` +
          "declared before this one"
        : `names "${id}" (resources[${later}]), declared after this one; a restart happens at ` +
          "the resource's own position, after what it names: declare that resource first",
    });
  });
}
