export { Virtual, virtual } from "@guidepup/virtual-screen-reader/browser.js";
