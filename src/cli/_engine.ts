/**
 * What the commands that work on this machine alone load when they run (`apply`, `plan`,
 * `status`, `inventory`, `enrol`, `run`): the engine, the configuration and the store.
 * One module, so the bundled program holds it as one part (packaging/build.ts); the link
 * is not here (src/cli/_link.ts).
 */
export { applyText, openEngine, planText } from "../engine/mod.ts";
export { loadConfig } from "../config.ts";
export { Store } from "../store/store.ts";
export { ensureOverlayKey, readOverlayKey } from "../overlay_key.ts";
