// The error every failure of the library is: `instanceof MoqError` narrows it, `code` is
// moq-lite's wire code (0 cancel, 1 internal, 4 transport, 6 unauthorized, …) and `reason`
// says what happened. The library's wasm side constructs it from here (this file sits
// beside moqx_wasm.js in the package), so there is one class, whichever way it is imported.

export class MoqError extends Error {
  /**
   * @param {number} code moq-lite's wire code.
   * @param {string} reason What happened.
   */
  constructor(code, reason) {
    super(reason);
    this.name = "MoqError";
    /** @readonly */
    this.code = code;
    /** @readonly */
    this.reason = reason;
  }
}
