/** The version of this package and of the other ZeroBridge libraries: the repository's VERSION file says the same. */
export const version = '2.0.0';
