import { drillSuite } from "./drill-suite.js";

drillSuite("pg");
