/**
 * The concrete path a permission set denies for an own-path pattern: Deno's
 * deny lists hold paths, not patterns, so a pattern is denied at run time in the
 * instance an installation makes (the parse refuses every match).
 */
export function ownPathInstance(pattern: string): string {
  return pattern.split("/").map((part) => {
    if (!part.includes("*")) return part;
    if (part === "*") return "default"; // a runlevel: the one the installation enables
    if (part.startsWith("*.")) return `multi-user.target${part.slice(1)}`; // the unit's WantedBy
    return part.replaceAll("*", ""); // a name prefix: the name itself
  }).join("/");
}
