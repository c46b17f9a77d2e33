// The single entry point to the vendored component library.
// Every module imports Preact/htm from here, never from vendor/ directly, so an
// upgrade of the vendored file changes exactly one line.
export {
  html,
  render,
  h,
  useState,
  useEffect,
  useLayoutEffect,
  useRef,
  useMemo,
  useCallback,
  useContext,
  createContext,
} from '../vendor/preact-htm-3.1.1.module.js';
