import com.alibaba.fastjson.JSON;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * The RocketMQ 4.9.8 Java client's admin calls, for the acceptance tests (compiled by them with
 * javac against the built jar into their temp dir). Each operation runs against each name server
 * on its own (an admin given one address), so one JVM answers for the fleet and the Java NameServer.
 *
 *   NsAdmin NS[,NS...] OP [OP...]      OP is name|arg|arg, one output line per NS and OP:
 *                                       NS TAB OP TAB {"ok": VALUE} | {"error": CODE, "message": ...}
 *   route|TOPIC  cluster  topics  bycluster|CLUSTER          reads (105, 106, 206, 224)
 *   kvput|NAMESPACE|KEY|VALUE  kvget|NAMESPACE|KEY  kvdel|NAMESPACE|KEY  kvlist|NAMESPACE
 *   wipe|BROKER_NAME  addperm|BROKER_NAME                    205, 327 (the count of topics)
 *   createtopic|BROKER_ADDR|TOPIC|READ|WRITE|PERM            to the broker, which re-registers
 *   brokertopics|BROKER_ADDR                                 the broker's own topic configs
 */
public class NsAdmin {
    public static void main(String[] a) throws Exception {
        if (a.length < 2) {
            System.err.println("usage: NsAdmin NS[,NS...] OP [OP...]");
            System.exit(2);
        }
        for (String ns : a[0].split(",")) {
            DefaultMQAdminExt admin = new DefaultMQAdminExt(5000);
            admin.setNamesrvAddr(ns);
            admin.setInstanceName("nsadmin-" + System.nanoTime());
            admin.start();
            try {
                for (int i = 1; i < a.length; i++) {
                    System.out.println(ns + "\t" + a[i] + "\t" + run(admin, ns, a[i].split("\\|", -1)));
                }
            } finally {
                admin.shutdown();
            }
        }
        System.exit(0);
    }

    static String run(DefaultMQAdminExt admin, String ns, String[] op) {
        try {
            return "{\"ok\":" + JSON.toJSONString(call(admin, ns, op)) + "}";
        } catch (MQClientException e) {
            return error(e.getResponseCode(), e.getErrorMessage());
        } catch (MQBrokerException e) {
            return error(e.getResponseCode(), e.getErrorMessage());
        } catch (Exception e) {
            return error(-1, e.toString());
        }
    }

    static String error(int code, String message) {
        return "{\"error\":" + code + ",\"message\":" + JSON.toJSONString(message) + "}";
    }

    static Object call(DefaultMQAdminExt admin, String ns, String[] op) throws Exception {
        switch (op[0]) {
            case "route": return admin.examineTopicRouteInfo(op[1]);
            case "cluster": return admin.examineBrokerClusterInfo();
            case "topics": return admin.fetchAllTopicList().getTopicList();
            case "bycluster": return admin.fetchTopicsByCLuster(op[1]).getTopicList();
            case "kvput": admin.createAndUpdateKvConfig(op[1], op[2], op[3]); return "done";
            case "kvget": return admin.getKVConfig(op[1], op[2]);
            case "kvdel": admin.deleteKvConfig(op[1], op[2]); return "done";
            case "kvlist": return admin.getKVListByNamespace(op[1]).getTable();
            case "wipe": return admin.wipeWritePermOfBroker(ns, op[1]);
            case "addperm": return admin.addWritePermOfBroker(ns, op[1]);
            case "createtopic":
                TopicConfig tc = new TopicConfig(op[2], Integer.parseInt(op[3]), Integer.parseInt(op[4]),
                    Integer.parseInt(op[5]));
                admin.createAndUpdateTopicConfig(op[1], tc);
                return "done";
            case "brokertopics": return admin.getAllTopicConfig(op[1], 5000).getTopicConfigTable();
            default: throw new IllegalArgumentException("unknown operation " + op[0]);
        }
    }
}
